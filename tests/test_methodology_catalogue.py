"""methodology/catalogue.py: a catalogue CSV read into named items, every error one line naming the row."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from methodology.catalogue import read_catalogue, read_rows


@dataclass(frozen=True)
class Item:
    name: str
    value: int


def _parse(row: dict) -> Item:
    if not row["value"].isdigit():
        raise ValueError(f"column 'value': {row['value']!r} is not a number")
    return Item(row["name"], int(row["value"]))


def test_items_in_file_order(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("name,value\nb,2\na,1\n")
    assert list(read_catalogue(path, _parse, "test file")) == ["b", "a"]


@pytest.mark.parametrize("text, fragment", [
    pytest.param("name,value\na,1\na,2\n", "row 3: duplicate of row 2: a second 'a'", id="twice"),
    pytest.param("name,value\na,x\n", "row 2, column 'value'", id="bad_cell"),
    pytest.param("name\na\n", r"row 1 \(header\): missing column\(s\) value", id="missing_column"),
    pytest.param("name,value\na,1,9\n", "row 2: expected 2 cells", id="long_row"),
    pytest.param("name,value\na\n", "row 2: expected 2 cells", id="short_row"),
])
def test_bad_rows_name_the_row(tmp_path, text, fragment):
    path = tmp_path / "c.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=fragment) as info:
        read_rows(path, _parse, "test file", required=("name", "value"))
    assert str(path) in str(info.value)


def test_rows_keep_a_key_of_several_columns(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("name,value\na,1\na,2\n")
    assert [(i.name, i.value) for i in read_rows(path, _parse, "t", key=lambda i: (i.name, i.value))] == \
        [("a", 1), ("a", 2)]  # the same name, a different key: both kept
    path.write_text("name,value\na,1\na,2\na,1\n")
    with pytest.raises(ValueError, match="row 4: duplicate of row 2: a second a, 1"):
        read_rows(path, _parse, "t", key=lambda i: (i.name, i.value))


def test_an_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="cannot read test file"):
        read_catalogue(tmp_path / "none.csv", _parse, "test file")

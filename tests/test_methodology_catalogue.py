"""methodology/catalogue.py: a catalogue CSV read into named items, every error one line naming the row."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from methodology.catalogue import read_catalogue


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
    pytest.param("name,value\na,1\na,2\n", "row 3: a second 'a'", id="twice"),
    pytest.param("name,value\na,x\n", "row 2, column 'value'", id="bad_cell"),
])
def test_bad_rows_name_the_row(tmp_path, text, fragment):
    path = tmp_path / "c.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=fragment):
        read_catalogue(path, _parse, "test file")


def test_an_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="cannot read test file"):
        read_catalogue(tmp_path / "none.csv", _parse, "test file")

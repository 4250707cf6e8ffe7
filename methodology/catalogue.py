"""Reading a hand-kept catalogue CSV (one item a row): every error one line naming the file and row. Pure.

The one reader of the hand-kept CSVs (interconnects, published results, prices): a
spreadsheet's byte-order mark tolerated, the header's required columns checked, a row
with too few or too many cells refused, a row's problem and a repeated key named by the
row number an editor shows.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Callable, Hashable, Sequence, TypeVar

Item = TypeVar("Item")


def _label(key: Hashable) -> str:
    return ", ".join(map(str, key)) if isinstance(key, tuple) else repr(key)


def read_rows(path: str | Path, parse: Callable[[dict], Item], what: str, *, required: Sequence[str] = (),
              key: Callable[[Item], Hashable] = lambda item: item.name) -> list[Item]:
    """Every row of ``path`` parsed, in file order.

    Args:
      path: the CSV.
      parse: a row (dict of cells) -> an item; raises ValueError on a bad row.
      what: what the file holds, for the unreadable-file message ("price file").
      required: columns the header must have.
      key: what must be unique in the file (default: the item's name).

    Raises:
      ValueError: "<path>: row N, <problem>", a missing column, a row of the wrong length,
        a key given twice, a file not UTF-8, or the file unreadable.
    """
    path = Path(path)
    try:
        # utf-8-sig: a spreadsheet's byte-order mark would otherwise hide the first column.
        with open(path, newline="", encoding="utf-8-sig") as handle:
            return _parse_rows(csv.DictReader(handle), path, parse, required, key)
    except OSError as err:
        raise ValueError(f"cannot read {what} {path}: {err.strerror or err}") from None
    except (UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path}: not a UTF-8 CSV file ({err})") from None


def _parse_rows(reader: csv.DictReader, path: Path, parse, required, key) -> list:
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path}: row 1 (header): missing column(s) {', '.join(missing)}")
    items, seen = [], {}
    for row in reader:
        line = reader.line_num  # the file's own line number, right across blank lines
        if None in row or any(v is None for v in row.values()):
            raise ValueError(f"{path}: row {line}: expected {len(reader.fieldnames)} cells")
        try:
            item = parse(row)
        except ValueError as err:
            raise ValueError(f"{path}: row {line}, {err}") from None
        k = key(item)
        if k in seen:
            raise ValueError(f"{path}: row {line}: duplicate of row {seen[k]}: a second {_label(k)}")
        seen[k] = line
        items.append(item)
    return items


def positive_number(row: dict, column: str, kind, required: bool = False):
    """A row's cell as a positive ``kind`` (int or float), None where empty and not ``required``.

    Raises:
      ValueError: empty where required, not a number, or not a positive finite one (naming the column).
    """
    text = (row.get(column) or "").strip()
    if not text:
        if required:
            raise ValueError(f"column '{column}' must not be empty")
        return None
    try:
        value = kind(text)
    except ValueError:
        raise ValueError(f"column '{column}': {text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"column '{column}': {text!r} must be positive")
    return value


def read_catalogue(path: str | Path, parse: Callable[[dict], Item], what: str) -> dict[str, Item]:
    """{item.name: item} for every row of ``path``, in file order (``read_rows``)."""
    return {item.name: item for item in read_rows(path, parse, what)}

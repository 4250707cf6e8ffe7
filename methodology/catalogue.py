"""Reading a hand-kept catalogue CSV (one named item a row): every error one line naming the file and row. Pure."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable, TypeVar

Item = TypeVar("Item")


def read_catalogue(path: str | Path, parse: Callable[[dict], Item], what: str) -> dict[str, Item]:
    """{item.name: item} for every row of ``path``, in file order.

    Args:
      path: the CSV.
      parse: a row (dict of cells) -> an item with a ``name``; raises ValueError on a bad row.
      what: what the file holds, for the unreadable-file message ("interconnect file").

    Raises:
      ValueError: "<path>: row N, <problem>", a name given twice, or the file unreadable.
    """
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            items: dict[str, Item] = {}
            for row in reader:
                try:
                    item = parse(row)
                except ValueError as err:
                    raise ValueError(f"{path}: row {reader.line_num}, {err}") from None
                if item.name in items:
                    raise ValueError(f"{path}: row {reader.line_num}: a second {item.name!r}")
                items[item.name] = item
    except OSError as err:
        raise ValueError(f"cannot read {what} {path}: {err.strerror or err}") from None
    return items

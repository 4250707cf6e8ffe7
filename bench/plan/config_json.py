"""config.json back to a ``RunConfig``: every value's JSON type checked, then each part validated.

Apart from bench/plan/config.py, which says what a config is and how it changes: this
module reads one a run wrote (`podbench run --config RUN_DIR/config.json`,
the training process's request, ``read_run``), where a value of the wrong
type (a string for a depth, 1 for a bool) must be refused by name before a
dataclass, which checks ranges and choices but not types, takes it.
"""
from __future__ import annotations

import types
import typing

from bench.plan.config import PARTS, RunConfig


def config_from_dict(requested: dict) -> RunConfig:
    """The RunConfig a run wrote as config.json's ``requested``, every value type-checked.

    Raises:
      ValueError: not a config: an unknown part or field, a value of the wrong type,
        or one the part refuses (the message names it).
    """
    if not isinstance(requested, dict):
        raise ValueError("config.json's 'requested' is not an object")
    unknown = sorted(set(requested) - set(PARTS) - {"preset"})
    if unknown:
        raise ValueError(f"unknown config part(s) {', '.join(unknown)}")
    parts = {}
    for part in PARTS:
        values = requested.get(part, {})
        if not isinstance(values, dict):
            raise ValueError(f"config part {part!r} is not an object")
        cls = type(getattr(RunConfig(), part))
        hints = typing.get_type_hints(cls)
        for name, value in values.items():
            if name not in hints:
                raise ValueError(f"unknown {part} setting {name!r}")
            if not _json_type_ok(value, hints[name]):
                raise ValueError(f"{part}.{name} = {value!r} is not a {hints[name]}")
        parts[part] = cls(**values)
    preset = requested.get("preset")
    if preset is not None and not isinstance(preset, str):
        raise ValueError("config 'preset' is not a name")
    return RunConfig(**parts, preset=preset)


def _json_type_ok(value, annotation) -> bool:
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for arg in args:
        if arg is type(None) and value is None:
            return True
        if arg is bool and isinstance(value, bool):
            return True
        if arg is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if arg is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if arg is str and isinstance(value, str):
            return True
    return False

"""bench/results/history.py: a baseline's history lines, appended and read back, locally and on gs://
(gcp-storage-emulator on loopback, tests/gcs_emulator.py)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from bench.errors import UsageError
from bench.results import history
from gcs_emulator import gcs_emulator  # noqa: F401 (the fixture)

RESULT = {
    "baseline": {"runs": [{"run_id": "a1", "images_per_sec": 100.0}, {"run_id": "a2", "images_per_sec": 102.0}],
                 "images_per_sec": 101.0},
    "new": {"runs": [{"run_id": "b1", "images_per_sec": 95.0}], "images_per_sec": 95.0},
    "throughput_ratio": {"ratio": 0.9406, "low": 0.91, "high": 0.97},
    "detectable_slowdown": 0.021, "max_slowdown": 0.02, "verdict": "slower",
}
WHEN = datetime(2026, 11, 24, 14, 0, 5, tzinfo=timezone.utc)


def test_entry_has_every_field():
    line = history.entry(RESULT, "main", "abc1234", now=WHEN)
    assert list(line) == list(history.FIELDS)
    assert line["compared_at"] == "2026-11-24T14:00:05Z"
    assert (line["baseline_runs"], line["new_runs"], line["new_run_images_per_sec"]) == (["a1", "a2"], ["b1"], [95.0])
    assert (line["ratio"], line["low"], line["high"], line["verdict"]) == (0.9406, 0.91, 0.97, "slower")


def test_append_and_read_back_locally_oldest_first(tmp_path):
    for label in ("one", "two", "three"):
        where = history.append_entry(str(tmp_path), "main", history.entry(RESULT, "main", label, now=WHEN))
    assert where == str(tmp_path / "history" / "main.jsonl")
    assert [e["label"] for e in history.read_history(str(tmp_path), "main")] == ["one", "two", "three"]
    assert [e["label"] for e in history.read_history(str(tmp_path), "main", last=2)] == ["two", "three"]
    assert history.read_history(str(tmp_path), "nightly") == []


def test_a_line_that_is_not_an_entry_is_named(tmp_path):
    history.append_entry(str(tmp_path), "main", history.entry(RESULT, "main", None, now=WHEN))
    with open(tmp_path / "history" / "main.jsonl", "a") as out:
        out.write(json.dumps({"ratio": 1.0}) + "\n")
    with pytest.raises(UsageError, match=r"main.jsonl line 2 is not a podbench history entry"):
        history.read_history(str(tmp_path), "main")


def test_an_unsafe_name_is_refused(tmp_path):
    with pytest.raises(UsageError, match="baseline name '../x' must be"):
        history.history_location(str(tmp_path), "../x")


def test_append_and_read_on_gcs(monkeypatch, gcs_emulator):  # noqa: F811 (the fixture)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    gcs_emulator.create_bucket("podbench-h")
    for label in ("one", "two"):
        where = history.append_entry("gs://podbench-h/ci", "main", history.entry(RESULT, "main", label, now=WHEN))
    assert where == "gs://podbench-h/ci/history/main.jsonl"
    assert [e["label"] for e in history.read_history("gs://podbench-h/ci", "main")] == ["one", "two"]
    assert history.read_history("gs://podbench-h/ci", "other") == []

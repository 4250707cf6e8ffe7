"""bench/cli/compare_trend.py: the trend table and drift line (end to end with --history: tests/test_cli_compare.py)."""
from __future__ import annotations

from bench.cli.compare_trend import trend_text


def entry(label: str, rate: float, verdict: str = "no significant change") -> dict:
    return {"compared_at": "2026-11-24T14:00:00Z", "label": label, "new_images_per_sec": rate,
            "baseline_images_per_sec": 100.0, "ratio": rate / 100, "low": rate / 104, "high": rate / 96,
            "detectable_slowdown": 0.061, "verdict": verdict}


def test_table_and_drift():
    entries = [entry("c1", 100.0), entry("c2", 98.0), entry("c3", 96.0), entry("c4", 94.0, "slower")]
    lines = trend_text(entries, "main", "results/baselines/history/main.jsonl").splitlines()
    assert lines[0] == ("podbench compare --trend main: 4 comparison(s), oldest first "
                        "(results/baselines/history/main.jsonl)")
    assert lines[2].split()[:3] == ["compared", "at", "label"]
    assert lines[6].split() == ["2026-11-24T14:00:00Z", "c4", "94.00", "100", "0.940x", "0.904-0.979x", "6.1%",
                                "slower"]
    # Two points a side (4 entries): median(96, 94) / median(100, 98) - 1.
    assert lines[-1] == f"drift: new images/sec, median of the last 2 vs the first 2: {95 / 99 - 1:+.1%} " \
                        "(1 of 4 comparisons alone said slower)"


def test_one_comparison_has_no_drift():
    assert trend_text([entry("c1", 100.0)], "main", "x").splitlines()[-1] == "drift: one comparison, none to measure"

"""bench/cli/compare_text.py: `podbench compare`'s text table and markdown, from the JSON it prints."""
from __future__ import annotations

import copy

import pytest

from bench.cli import compare_text

RESULT = {
    "baseline": {"runs": [{"run_id": "20261123T080000Z-aaaaaa", "run_dir": "a", "images_per_sec": 212.4,
                           "intervals": 12}],
                 "images_per_sec": 212.4, "step_time_s": {"p50": 0.0641, "p90": 0.0712}, "mfu": 0.012,
                 "measured_run_noise_sd": None},
    "new": {"runs": [{"run_id": "20261123T080100Z-bbbbbb", "run_dir": "b", "images_per_sec": 22.2, "intervals": 12}],
            "images_per_sec": 22.2, "step_time_s": {"p50": 0.675, "p90": 1.25}, "mfu": 0.0012,
            "measured_run_noise_sd": None},
    "throughput_ratio": {"ratio": 0.1045, "low": 0.0721, "high": 0.1512, "confidence": 0.95, "resamples": 2000,
                         "seed": 0},
    "step_time_ratio": {"p50": 10.53, "p90": 17.56},
    "assumed_run_noise_sd": 0.1, "assumed_for": ["baseline", "new"],
    "differences": [{"fact": "xla", "label": "XLA", "baseline": [False], "new": [True], "refused_as": None}],
    "max_slowdown": 0.05, "detectable_slowdown": 0.3716, "new_run_noise": None, "verdict": "slower", "exit_code": 1,
}
DETECTABLE = ("detectable: a slowdown of 37.2% or more, with 1 baseline and 1 new run(s) at this noise and "
              "--max-slowdown 5%; smaller ones pass unseen (more runs a side lower this)")


def test_text():
    assert compare_text.text(RESULT).splitlines() == [
        "podbench compare: 1 new run(s) against 1 baseline run(s)",
        "",
        "                    baseline       new  new / baseline",
        "images/sec               212     22.20  0.104x",
        "  95% interval                          0.072-0.151x",
        "step time p50        64.1 ms  675.0 ms  10.53x",
        "step time p90        71.2 ms   1.250 s  17.56x",
        "MFU                     1.2%     0.12%",
        "runs                       1         1",
        "measured intervals        12        12",
        "",
        "differences (the comparison may be unfair): XLA off -> on",
        "run-to-run noise (SD of log throughput): baseline: one run, 10% assumed (--run-noise); "
        "new: one run, 10% assumed (--run-noise)",
        DETECTABLE,
        "verdict: slower: throughput -89.5% (95% interval -92.8% to -84.9%), more than the 5% --max-slowdown "
        "allows (exit code 1)",
    ]


def test_markdown():
    assert compare_text.markdown(RESULT).splitlines() == [
        "### podbench compare: slower",
        "",
        "|  | baseline | new | new / baseline |",
        "|---|---:|---:|---:|",
        "| images/sec | 212 | 22.20 | **0.104x** (95% interval 0.072-0.151x) |",
        "| step time p50 | 64.1 ms | 675.0 ms | 10.53x |",
        "| step time p90 | 71.2 ms | 1.250 s | 17.56x |",
        "| MFU | 1.2% | 0.12% |  |",
        "| runs | 1 | 1 |  |",
        "| measured intervals | 12 | 12 |  |",
        "",
        "differences (the comparison may be unfair): XLA off -> on",
        "",
        "run-to-run noise (SD of log throughput): baseline: one run, 10% assumed (--run-noise); "
        "new: one run, 10% assumed (--run-noise)",
        "",
        DETECTABLE,
        "",
        "**verdict: slower: throughput -89.5% (95% interval -92.8% to -84.9%), more than the 5% --max-slowdown "
        "allows (exit code 1)**",
        "",
        "runs: baseline 20261123T080000Z-aaaaaa; new 20261123T080100Z-bbbbbb",
    ]


def changed(**updates) -> dict:
    result = copy.deepcopy(RESULT)
    for key, value in updates.items():
        result[key] = value
    return result


@pytest.mark.parametrize("result, line", [
    pytest.param(changed(verdict="faster", throughput_ratio={**RESULT["throughput_ratio"], "ratio": 1.5, "low": 1.2,
                                                              "high": 1.9}),
                 "verdict: faster: throughput +50.0% (95% interval +20.0% to +90.0%)", id="faster"),
    pytest.param(changed(verdict="no significant change",
                         throughput_ratio={**RESULT["throughput_ratio"], "ratio": 0.97, "low": 0.75, "high": 1.25}),
                 "verdict: no significant change: throughput -3.0% (95% interval -25.0% to +25.0%); slower means "
                 "the whole interval below -5.0%", id="no-change"),
])
def test_verdict_lines(result, line):
    assert compare_text.verdict_line(result) == line


def test_measured_noise_and_refused_differences():
    result = changed(assumed_for=[], differences=[
        {"fact": "device_kind", "label": "device", "baseline": ["AMD EPYC"], "new": ["Tesla V100", "AMD EPYC"],
         "refused_as": "hardware"}])
    result["baseline"]["measured_run_noise_sd"], result["new"]["measured_run_noise_sd"] = 0.081, 0.0
    result["baseline"]["runs"] *= 3
    result["new"]["runs"] *= 2
    assert compare_text.noise_line(result) == ("run-to-run noise (SD of log throughput): baseline: 8.1% measured over "
                                               "its 3 runs; new: 0.0% measured over its 2 runs")
    assert compare_text.differences_line(result) == (
        "differences (the comparison may be unfair): device AMD EPYC -> Tesla V100/AMD EPYC "
        "(a different hardware: --allow-different)")
    assert compare_text.differences_line(changed(differences=[])).startswith("differences: none")


def test_unknown_mfu_reads_n_a():
    result = changed()
    result["new"]["mfu"] = None
    assert ("MFU", "1.2%", "n/a", "") in compare_text.rows(result)


def test_a_one_run_side_given_the_baselines_measured_noise_says_where_it_came_from():
    result = changed(new_run_noise={"sd": 0.0234, "from": "baseline main's 5 runs"})
    assert compare_text.noise_line(result).endswith("new: one run, 2.3% assumed (measured by baseline main's 5 runs)")

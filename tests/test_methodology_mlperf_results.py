"""methodology/mlperf_results.py: a published MLPerf result's figures from its result logs."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from methodology import mlperf_results as m

IMAGES = m.IMAGENET_TRAIN_EXAMPLES


def new_format(batch: int, evals: list[tuple[int, float, float]], start_s: float = 1000.0,
               stop_s: float | None = None, ranks: int = 1, optimizer: str = "lars") -> str:
    """A v0.7+ log: evals are (epoch, seconds after run_start, top-1); every event printed by ``ranks`` ranks."""
    def line(key, value, t, **meta):
        return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": int(round(t * 1000)),
                                         "event_type": "POINT_IN_TIME", "key": key, "value": value,
                                         "metadata": {"file": "x.py", **meta}})
    lines = ["some launcher chatter", line("global_batch_size", batch, start_s - 5),
             line("opt_name", optimizer, start_s - 5), line("run_start", None, start_s)]
    for epoch, after_s, top1 in evals:
        lines.append(line("eval_accuracy", top1, start_s + after_s, epoch_num=epoch))
    end = stop_s if stop_s is not None else start_s + evals[-1][1] + 1
    lines.append(line("run_stop", None, end, status="success"))
    return "\n".join(x for x in lines for _ in range(ranks))


def old_format(batch: int, evals: list[tuple[int, float, float]], start_s: float = 1.5e9) -> str:
    """A v0.5-v0.6 log (``:::MLL <seconds> key: json``), as mpirun tags it."""
    def line(key, value, t, **meta):
        return f"[1,0]<stdout>::::MLL {t:.3f} {key}: " + json.dumps({"value": value, "metadata": meta})
    lines = [line("global_batch_size", batch, start_s - 1), line("run_start", None, start_s)]
    lines += [line("eval_accuracy", top1, start_s + after_s, epoch_num=epoch) for epoch, after_s, top1 in evals]
    lines.append(line("run_stop", None, start_s + evals[-1][1] + 2))
    return "\n".join(lines)


def test_both_formats_give_the_same_figures():
    evals = [(4, 40.0, 0.2), (8, 60.0, 0.5), (12, 80.0, 0.758), (16, 100.0, 0.761)]
    new, old = m.run_figures(new_format(1024, evals)), m.run_figures(old_format(1024, evals))
    assert new.global_batch == old.global_batch == 1024
    assert new.epochs_to_target == old.epochs_to_target == 16  # 0.758 is below 0.759
    assert new.interval_images_per_sec == pytest.approx(old.interval_images_per_sec)
    # Each interval: 4 epochs in 20 s. The first evaluation's 40 s (start-up, compile) is no interval.
    assert new.interval_images_per_sec == pytest.approx((4 * IMAGES / 20,) * 3)
    assert new.minutes == pytest.approx(101 / 60)
    assert new.optimizer == "lars"


def test_events_every_rank_repeats_count_once():
    evals = [(2, 10.0, 0.5), (4, 20.0, 0.77)]
    assert m.run_figures(new_format(256, evals, ranks=8)) == m.run_figures(new_format(256, evals))


def test_evaluations_outside_the_run_are_not_timed():
    text = new_format(256, [(2, 10.0, 0.5), (4, 20.0, 0.77)], stop_s=1021.0)
    late = ":::MLLOG " + json.dumps({"time_ms": 1_100_000, "key": "eval_accuracy", "value": 0.9,
                                     "metadata": {"epoch_num": 6}})
    assert m.run_figures(text + "\n" + late) == m.run_figures(text)


def test_a_run_that_never_reaches_the_target_says_so():
    assert m.run_figures(new_format(256, [(2, 10.0, 0.5), (4, 20.0, 0.7)])).epochs_to_target is None


def test_a_log_without_its_clock_is_refused_naming_what_lacks():
    with pytest.raises(ValueError, match="run_start, run_stop"):
        m.run_figures(":::MLLOG " + json.dumps({"time_ms": 1, "key": "global_batch_size", "value": 8}))


def test_result_figures_are_median_rate_and_olympic_time_and_epochs():
    runs = [m.run_figures(new_format(1024, [(4, 40.0, 0.3), (8, 40.0 + s, 0.76)], stop_s=1000 + 40 + s + 1))
            for s in (18.0, 20.0, 22.0, 24.0, 60.0)]
    result = m.result_figures(runs)
    assert result.runs == 5 and result.global_batch == 1024
    assert result.images_per_sec == pytest.approx(4 * IMAGES / 22.0)  # the median interval
    assert result.minutes == pytest.approx((40 + 20 + 1 + 40 + 22 + 1 + 40 + 24 + 1) / 3 / 60)
    assert result.epochs == 8


def test_a_run_at_another_batch_keeps_its_time_but_not_its_rate():
    """MLPerf v2.0 Dell XE8545x4A100-SXM-40GB: 4 runs at 1,024, one at 816."""
    at_1024 = [m.run_figures(new_format(1024, [(4, 40.0, 0.3), (8, 60.0, 0.76)])) for _ in range(4)]
    at_816 = m.run_figures(new_format(816, [(4, 40.0, 0.3), (8, 90.0, 0.76)]))
    result = m.result_figures(at_1024 + [at_816])
    assert result.global_batch == 1024
    assert result.images_per_sec == pytest.approx(4 * IMAGES / 20.0)
    assert result.minutes == pytest.approx(61 / 60)  # olympic over all five: the slow 816 run dropped


def test_a_result_no_run_of_which_reached_the_target_is_refused():
    with pytest.raises(ValueError, match="no run reached the target"):
        m.result_figures([m.run_figures(new_format(256, [(2, 10.0, 0.5), (4, 20.0, 0.7)]))])


def test_the_command_prints_a_results_figures(tmp_path):
    paths = []
    for i, s in enumerate((20.0, 21.0, 22.0)):
        path = tmp_path / f"result_{i}.txt"
        path.write_text(new_format(2048, [(4, 40.0, 0.3), (8, 40.0 + s, 0.76)]))
        paths.append(str(path))
    done = subprocess.run([sys.executable, "-m", "methodology.mlperf_results", *paths], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("global_batch=2048 optimizer=lars runs=3 ")
    assert "epochs=8.0" in done.stdout


def test_the_command_refuses_a_log_it_cannot_read_in_one_line(tmp_path):
    bad = tmp_path / "result_0.txt"
    bad.write_text("no MLPerf events here\n")
    done = subprocess.run([sys.executable, "-m", "methodology.mlperf_results", str(bad)], capture_output=True,
                          text=True, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 2
    assert done.stderr.startswith("error: result log lacks run_start") and done.stderr.count("\n") == 1


def v05_format(batch: int, evals: list[tuple[int, float, float]], start_s: float = 1.5e9) -> str:
    """A v0.5 log: ``:::MLPv0.5.0 resnet <seconds> (<file:line>) key: value``."""
    def line(t, key, value=None):
        return f":::MLPv0.5.0 resnet {t:.9f} (train.py:1) {key}" + ("" if value is None else f": {value}")
    lines = [line(start_s, "run_start"), line(start_s + 0.1, "input_batch_size", batch),
             line(start_s + 0.2, "eval_target", 0.749)]
    lines += [line(start_s + after_s, "eval_accuracy", json.dumps({"epoch": epoch, "value": top1}))
              for epoch, after_s, top1 in evals]
    lines += [line(start_s + evals[-1][1] + 1, "run_stop"), line(start_s + evals[-1][1] + 2, "run_final")]
    return "\n".join(lines)


def test_v05_logs_give_the_same_figures_as_the_later_formats():
    evals = [(4, 40.0, 0.2), (8, 60.0, 0.5), (12, 80.0, 0.75)]
    v05 = m.run_figures(v05_format(208, evals), target_top1=0.749)
    assert v05.global_batch == 208  # input_batch_size as the code logged it (NVIDIA's: a GPU's)
    assert v05.epochs_to_target == 12 and v05.minutes == pytest.approx(81 / 60)
    assert v05.interval_images_per_sec == pytest.approx((4 * IMAGES / 20,) * 2)

"""bench/harness/loop.py: blocks end where Keras's do, each timed once its results exist (the engine's copy to the
host between a block's last step and its record), and the harness's pieces are called in the TensorFlow engine's order.

The steps here are stand-ins (numpy in, numpy out): the loop's order and bookkeeping are what is tested,
with the real harness pieces (step clock, progress, events, block end, evaluations, MLPerf segment) and
the run's real files. The compiled steps are tested in tests/test_train_jax_recipe.py and end to end in
tests/test_train_jax_run.py.
"""
import io
import itertools

import numpy as np
import pytest

from bench.plan import config as cfg
from bench.harness.block_end import BlockEnd
from bench.harness.evaluation import Evaluations
from bench.harness.events import LOSS_TAG, TrainingEvents
from bench.harness.mlperf import MLPerfSegment
from bench.harness.progress import Progress
from bench.harness.steps import StepClock
from bench.harness.stopping import StopRequest
from bench.plan.resolve import ResolvedRun, resolve
from bench.results import jsonl, mllog
from bench.results.eventfile import EventFileWriter, read_event_log
from bench.harness import loop


def plan_of(steps_per_epoch=4, spe=2, train_steps=8, warmup=2, eval_every=0) -> ResolvedRun:
    config = cfg.replace(cfg.RunConfig(), runtime=dict(framework="jax"), data=dict(steps_per_epoch=steps_per_epoch),
                         train=dict(train_steps=train_steps, warmup_steps=warmup, steps_per_execution=spe,
                                    per_replica_batch_size=2))
    plan = resolve(config, "cpu", 1)
    return ResolvedRun(**{**plan.__dict__, "eval_every_epochs": eval_every, "eval_steps": 2 if eval_every else 0})


@pytest.mark.parametrize("spe_per_epoch, spe, train_steps, initial, expected", [
    pytest.param(4, 2, 8, 0, [(0, 2, False), (0, 4, True), (1, 6, False), (1, 8, True)], id="whole_blocks"),
    pytest.param(5, 2, 10, 0, [(0, 2, False), (0, 4, False), (0, 5, True), (1, 7, False), (1, 9, False),
                               (1, 10, True)], id="short_last_block_of_an_epoch"),
    pytest.param(4, 1, 6, 0, [(0, 1, False), (0, 2, False), (0, 3, False), (0, 4, True), (1, 5, False),
                              (1, 6, False)], id="every_step_and_a_run_ending_mid_epoch"),
    pytest.param(4, 2, 8, 6, [(1, 8, True)], id="resumed_mid_epoch"),
    pytest.param(4, 4, 8, 8, [], id="nothing_left"),
])
def test_blocks_end_where_keras_ends_them(spe_per_epoch, spe, train_steps, initial, expected):
    plan = plan_of(spe_per_epoch, spe, train_steps, warmup=spe)
    assert list(loop.blocks(plan, initial)) == expected
    assert all(plan.is_logged_step(last) for _, last, _ in loop.blocks(plan, 0))


class Recorder:
    """Stand-in compiled steps that log what the loop asked of them, in order."""

    def __init__(self, log, accuracies=()):
        self.log, self.accuracies = log, list(accuracies)

    def train(self, state, images, labels):
        self.log.append("step")
        return state + 1, np.float32(2.0 - 0.1 * state)

    def evaluate(self, state, images, labels, weights):
        """Each evaluation step sees 4 examples; the accuracy is the one listed for the epoch (2 steps each)."""
        self.log.append("eval")
        top_1 = self.accuracies[state // 2 - 1]
        return np.array([top_1 * 4, 4.0, 4.0])


def hooks_for(tmp_path, plan, request=None, checkpointer=None, every_s=None, target=None, log=None):
    clock = StepClock(clock=itertools.count(0.0, 0.5).__next__)
    if log is not None:
        original = clock.record
        clock.record = lambda step, *wait: (log.append(f"record {step}"), original(step, *wait))[1]
    lifecycle = jsonl.LifecycleWriter(tmp_path / "lifecycle.jsonl")
    writer = EventFileWriter(tmp_path / "events")
    evaluations = Evaluations(clock, target, clock=clock.clock) if plan.eval_every_epochs else None
    events = TrainingEvents(writer, clock, plan.schedule, plan.steps_per_epoch, plan.global_batch_size)
    block_end = BlockEnd(clock, request or StopRequest(), lifecycle, checkpointer, every_s, clock=clock.clock,
                         on_save=lambda step: events.flush())
    ml = MLPerfSegment(mllog.MLLogWriter(str(tmp_path / "mlperf.log")), request)
    return loop.Hooks(clock, Progress(clock, plan.global_batch_size, plan.warmup_steps, plan.train_steps,
                                      plan.log_steps, io.StringIO(), evaluations),
                      events, block_end, evaluations, ml), lifecycle, writer


def test_every_block_is_recorded_once_its_loss_is_on_the_host(tmp_path, monkeypatch):
    """The clock is read after the block's losses are copied to the host (JAX's wait for the devices),
    never at dispatch: a host copy stands between a block's last step and its record."""
    plan, log = plan_of(), []
    recorder = Recorder(log)
    def to_host(values):
        log.append("host copy")
        return [float(v) for v in values]

    hooks, lifecycle, writer = hooks_for(tmp_path, plan, log=log)
    state = loop.fit(0, loop.Steps(recorder.train, itertools.repeat((None, None)), to_host=to_host), plan, hooks, 0)
    lifecycle.close()
    writer.close()
    assert state == 8
    block = ["step", "step", "host copy"]
    assert log == ["record 0", *block, "record 2", *block, "record 4", *block, "record 6", *block, "record 8"]
    losses = read_event_log(str(tmp_path / "events"), [LOSS_TAG]).scalars[LOSS_TAG]
    # each block's mean loss at its last step: steps 1-2 had losses 2.0 and 1.9
    assert [(e.step, round(e.value, 4)) for e in losses] == [(2, 1.95), (4, 1.75), (6, 1.55), (8, 1.35)]


def test_an_evaluation_after_each_due_epoch_and_the_stop_at_the_target(tmp_path):
    plan, log = plan_of(steps_per_epoch=2, spe=2, train_steps=8, warmup=2, eval_every=1), []
    recorder = Recorder(log, accuracies=[0.25, 0.5, 0.75])
    hooks, lifecycle, _ = hooks_for(tmp_path, plan, target=0.7)
    steps = loop.Steps(recorder.train, itertools.repeat((None, None)), recorder.evaluate,
                       lambda: itertools.repeat((None, None, None)))
    assert loop.fit(0, steps, plan, hooks, 0) == 6  # the target reached after epoch 3, of 4 planned
    assert [e.top_1 for e in hooks.evaluations.records] == [0.25, 0.5, 0.75]
    assert [e.step for e in hooks.evaluations.records] == [2, 4, 6]
    assert log.count("eval") == 3 * plan.eval_steps
    lines = [mllog.parse_line(line) for line in (tmp_path / "mlperf.log").read_text().splitlines()]
    keys = [line["key"] for line in lines if line]
    assert keys.count(mllog.EVAL_ACCURACY) == 3 and keys[-1] == mllog.RUN_STOP
    assert [line["metadata"]["status"] for line in lines if line and line["key"] == mllog.RUN_STOP] == ["success"]


def test_a_stop_notice_ends_at_the_block_and_writes_a_last_checkpoint(tmp_path):
    class Saver:
        state, saved = None, []

        def save(self, step):
            self.saved.append((step, self.state))
            return f"ckpt-{step}"

        def bytes(self, path):
            return 1

    plan, request, saver = plan_of(), StopRequest(), Saver()
    recorder = Recorder([])

    def train(state, images, labels):
        if state == 2:  # a SIGTERM arrives during the second block
            request.graceful = True
            request.handle(15)
        return recorder.train(state, images, labels)

    hooks, lifecycle, _ = hooks_for(tmp_path, plan, request=request, checkpointer=saver)
    assert loop.fit(0, loop.Steps(train, itertools.repeat((None, None))), plan, hooks, 0, saver) == 4
    assert saver.saved == [(4, 4)]  # after the block it was in, with that block's state
    lifecycle.close()
    (event,) = [e for e in jsonl.read_lifecycle(tmp_path / "lifecycle.jsonl") if e["event"] == "checkpoint"]
    assert (event["step"], event["path"]) == (4, "ckpt-4")
    lines = (tmp_path / "mlperf.log").read_text()
    assert mllog.SEGMENT_STOP in lines and mllog.RUN_STOP not in lines  # the run can be resumed


def test_a_resumed_fit_starts_its_records_and_blocks_where_it_restored(tmp_path):
    plan, log = plan_of(), []
    hooks, _, _ = hooks_for(tmp_path, plan, log=log)
    assert loop.fit(6, loop.Steps(Recorder([]).train, itertools.repeat((None, None))), plan, hooks, 6) == 8
    assert [r.step for r in hooks.timer.records] == [6, 8]

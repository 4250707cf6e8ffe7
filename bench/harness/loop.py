"""The training loop of the engines that write their own (JAX, torch): blocks of steps, each timed once its
results are on the host.

JAX and torch on a GPU dispatch asynchronously: a step returns before the devices
have run it, so a clock read then measures Python. The loop dispatches a block of
steps (``steps_per_execution``) and reads the clock once, after the block's losses
have been copied to the host (the engine's ``to_host``: the one synchronisation a
block), as the TensorFlow engine's callbacks read it after Keras's block; the
devices are busy with the queued steps meanwhile, and nothing waits for them
between a block's steps. Blocks end where the TensorFlow engine's do (every
``steps_per_execution`` steps, and at each epoch's end), so warm-up, checkpoints
and evaluations fall on the same steps under every engine.

After each block, in the order the TensorFlow engine's callbacks run: the step
record, the progress line, the TensorBoard events, then the block-end decisions
(a checkpoint when one is due, a stop when a signal asked); at each epoch's end,
an evaluation when one is due. No framework: the engine gives its compiled steps,
its batches and its copy to the host (``Steps``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence, TextIO

from bench.harness.block_end import BlockEnd
from bench.harness.evaluation import Evaluations
from bench.harness.events import TrainingEvents
from bench.harness.mlperf import MLPerfSegment
from bench.harness.progress import Progress
from bench.harness.steps import StepClock
from bench.harness.stopping import Interrupted, StopRequest
from bench.plan.config import RunConfig
from bench.plan.resolve import ResolvedRun
from bench.results.summary import configuration_of
from methodology.target import EvalRecord


@dataclass
class Hooks:
    """What the loop reports to, the harness's pieces (bench/harness/), built by the run.

    Attributes:
      timer: the step clock.
      progress: progress lines.
      events: TensorBoard events.
      block_end: checkpoints and stops.
      evaluations: None without evaluation.
      mlperf: None without an MLPerf log.
      announce: called with each evaluation record (a line for the user).
    """

    timer: StepClock
    progress: Progress
    events: TrainingEvents
    block_end: BlockEnd
    evaluations: Evaluations | None = None
    mlperf: MLPerfSegment | None = None
    announce: Callable[[EvalRecord], None] = field(default=lambda record: None)


def make_hooks(config: RunConfig, plan: ResolvedRun, files, request: StopRequest, checkpointer, segment: int,
               initial_step: int, agree, stream: TextIO, say: Callable[[str], None]) -> Hooks:
    """The harness's pieces of one fit, as the TensorFlow engine's make_callbacks builds them.

    Args:
      files: the run's RunFiles.
      checkpointer: the engine's (None: no checkpoints).
      agree: the engine's agreement across processes (None: one process).
      stream: where progress lines go; say: a line for the user.
    """
    timer = StepClock(files.steps)
    evaluations = None
    if plan.eval_every_epochs:
        evaluations = Evaluations(timer, config.train.target_accuracy, files.evals, segment)
    # A resumed fit recompiles: its first block is warm-up, as the summary counts it.
    warmup = plan.warmup_steps if not initial_step else max(plan.warmup_steps, initial_step + 1)
    events = TrainingEvents(files.events, timer, plan.schedule, plan.steps_per_epoch, plan.global_batch_size,
                            {**configuration_of(files.requested, plan), "optimizer": plan.schedule.optimizer,
                             "steps_per_execution": plan.steps_per_execution})
    block_end = BlockEnd(timer, request, files.lifecycle, checkpointer,
                         config.checkpoint.every_s if checkpointer is not None else None, config.checkpoint.grace_s,
                         segment, agree, timer.clock, on_save=lambda _: events.flush())
    mlperf = MLPerfSegment(files.mllog, request, segment, initial_step) if files.mllog is not None else None
    return Hooks(timer, Progress(timer, plan.global_batch_size, warmup, plan.train_steps, plan.log_steps, stream,
                                 evaluations), events, block_end, evaluations, mlperf, announcer(say))


def announcer(say: Callable[[str], None]) -> Callable[[EvalRecord], None]:
    """An evaluation's line for the user."""
    def announce(e: EvalRecord) -> None:
        top_5 = "" if e.top_5 is None else f", top-5 {e.top_5:.4f}"
        say(f"epoch {e.epoch}: top-1 {e.top_1:.4f}{top_5} (evaluation {e.duration_s:.1f} s, not counted)")
    return announce


def training_line(config: RunConfig, plan: ResolvedRun, initial_step: int) -> str:
    """The line said before the first step: what is trained, what is not measured, the evaluations."""
    evaluation = ""
    if plan.eval_every_epochs:
        goal = f", stopping at top-1 {config.train.target_accuracy:g}" if config.train.target_accuracy else ""
        evaluation = f", evaluating every {plan.eval_every_epochs} epoch(s){goal}"
    if initial_step:
        return (f"training steps {initial_step + 1}-{plan.train_steps} of {plan.train_steps} (the first block "
                f"is not measured){evaluation}…")
    return (f"training {plan.train_steps} steps ({plan.warmup_steps} warm-up, not measured){evaluation}; "
            "the first block includes the step's first run…")


def probes_update(config: RunConfig, plan: ResolvedRun) -> bool:
    """--update-probe as given, else on a GPU or TPU (bench/plan/config.py MeasureConfig)."""
    asked = config.measure.measure_update
    return asked if asked is not None else plan.platform != "cpu"


def _floats(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values]


@dataclass
class Steps:
    """The engine's compiled computations, their input, and its copy to the host.

    Attributes:
      train: (state, images, labels) -> (state, loss); the loss may still be on its way (asynchronous).
      batches: an iterator of (images, labels) global batches (synthetic data: the same one forever).
      evaluate: (state, images, labels, weights) -> [top-1 hits, top-5 hits, weight], summed (None: no evaluation).
      eval_batches: a fresh iterator of (images, labels, weights) for each evaluation.
      to_host: device values (a block's losses, one evaluation's sums) -> floats on the host, once the devices
        have computed them: the loop's only wait for the devices (JAX: ``jax.device_get``; torch: a copy to
        the CPU). The default takes values that are already the host's.
    """

    train: Callable
    batches: Iterator
    evaluate: Callable | None = None
    eval_batches: Callable[[], Iterator] | None = None
    to_host: Callable[[Sequence[Any]], list[float]] = _floats


def blocks(plan: ResolvedRun, initial_step: int) -> Iterator[tuple[int, int, bool]]:
    """(epoch, last step of the block, whether it ends the epoch) of every block from ``initial_step`` on.

    A block is ``steps_per_execution`` steps, cut short at each epoch's end, as Keras runs them.
    """
    step = initial_step
    while step < plan.train_steps:
        epoch, within = divmod(step, plan.steps_per_epoch)
        end_of_block = min((within // plan.steps_per_execution + 1) * plan.steps_per_execution,
                           plan.steps_per_epoch)
        last = min(epoch * plan.steps_per_epoch + end_of_block, plan.train_steps)
        yield epoch, last, last % plan.steps_per_epoch == 0
        step = last


def fit(state: Any, steps: Steps, plan: ResolvedRun, hooks: Hooks, initial_step: int, checkpointer=None) -> Any:
    """Trains from ``initial_step`` to the plan's end, a stop notice, or the target; returns the newest state.

    ``checkpointer`` (its ``state`` set before each block-end decision) is the block end's.
    """
    h = hooks
    h.timer.record(initial_step)  # where this process's training starts (it includes compilation)
    h.events.begin()
    h.events.session_start()
    if h.mlperf is not None:
        h.mlperf.train_begin()
    h.block_end.begin()
    step, losses, open_epoch = initial_step, [], None
    clock = h.timer.clock
    for epoch, last, ends_epoch in blocks(plan, initial_step):
        if epoch != open_epoch:
            open_epoch = epoch
            if h.mlperf is not None:
                h.mlperf.epoch_begin(epoch + 1)
        waited_s = 0.0
        while step < last:
            asked_s = clock()
            images, labels = next(steps.batches)  # the time the step waits for its batch: the input's share
            waited_s += clock() - asked_s
            state, loss = steps.train(state, images, labels)
            losses.append(loss)
            step += 1
        block_losses = steps.to_host(losses)  # the block's results are on the host now
        block_loss = math.fsum(block_losses) / len(block_losses)
        h.timer.record(step, waited_s)
        losses.clear()
        h.progress.after_block()
        h.events.after_block(block_loss)
        if checkpointer is not None:
            checkpointer.state = state
        if h.block_end.after_block():  # a stop notice: no evaluation, the epoch ends here
            if h.mlperf is not None:
                h.mlperf.epoch_end(epoch + 1)
            break
        # As Keras does, an epoch that the run's last step cuts short still ends (and evaluates, if due).
        if (ends_epoch or step >= plan.train_steps) and _end_epoch(state, steps, plan, hooks, epoch):
            break
    if h.mlperf is not None:
        h.mlperf.train_end(h.evaluations is not None and h.evaluations.reached_target)
    h.events.flush()
    return state


def _end_epoch(state: Any, steps: Steps, plan: ResolvedRun, hooks: Hooks, epoch: int) -> bool:
    """An epoch ended: its evaluation if one is due (as Keras's validation_freq: every Nth epoch).
    Returns True when training stops here (the target reached)."""
    h = hooks
    due = h.evaluations is not None and plan.eval_every_epochs and (epoch + 1) % plan.eval_every_epochs == 0
    if not due:
        if h.mlperf is not None:
            h.mlperf.epoch_end(epoch + 1)
        return False
    top_1, top_5 = evaluate(state, steps, plan, hooks, epoch + 1)
    record = h.evaluations.record(epoch + 1, top_1, top_5)
    h.events.evaluation(record)
    if h.mlperf is not None:
        h.mlperf.epoch_end(epoch + 1, record.top_1)
    h.announce(record)
    return h.evaluations.reached(record)


def evaluate(state: Any, steps: Steps, plan: ResolvedRun, hooks: Hooks, epoch: int) -> tuple[float, float]:
    """Every validation record once (padding weighs nothing); a stop notice does not wait for the end.

    Raises:
      Interrupted: a stop notice came during it.
    """
    h = hooks
    if h.mlperf is not None:
        h.mlperf.eval_begin(epoch)
    h.evaluations.begin()
    totals = [0.0, 0.0, 0.0]
    batches = steps.eval_batches()
    for _ in range(plan.eval_steps):
        images, labels, weights = next(batches)
        sums = steps.to_host(steps.evaluate(state, images, labels, weights))
        totals = [total + value for total, value in zip(totals, sums)]
        if h.block_end.during_evaluation():
            raise Interrupted(h.block_end.request.signal_name)
    h.evaluations.end()
    if h.mlperf is not None:
        h.mlperf.eval_end(epoch)
    hits_1, hits_k, weight = totals
    return hits_1 / weight, hits_k / weight


def forever(batch):
    """Synthetic data's batches: the same one, made once on the devices, every step."""
    while True:
        yield batch


def prepend(first, rest):
    """``first`` (the batch an engine drew to build its step with), then ``rest``: no batch is skipped."""
    yield first
    yield from rest

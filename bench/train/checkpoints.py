"""The TensorFlow engine's checkpoints, and the block-end decisions (bench/harness/block_end.py) as a callback.

A checkpoint holds the model, the optimizer's state (its slots, its step
counter and, under mixed_float16, the loss scale: the optimizer tracks them
all) and the exact global step, read from the step timer after the block that
ended there.

Under multi_worker every worker must write (variables are synchronized when
saved) and stop at the same step; ``agreement`` is how the workers agree on
both decisions, one small all-reduce a block end. Non-chief workers write to a temporary directory removed after
each write, as tf_keras does; all of them restore from the chief's.
"""
from __future__ import annotations

import tempfile
import time

import tensorflow as tf
import tf_keras

from bench.errors import RunFailed, UsageError
from bench.harness.block_end import BlockEnd
from bench.harness.checkpoints import MAX_TO_KEEP, checkpoint_number, directory_full
from bench.harness.stopping import DEFAULT_GRACE_S, Interrupted, StopRequest
from bench.results import jsonl
from bench.train.timer import StepTimerCallback



class Checkpointer:
    """Writes and reads a run's checkpoints under ``directory`` (local or gs://).

    Args:
      model: the compiled model (its optimizer is saved with it).
      strategy: the run's strategy (who writes where under multi_worker).
      directory: where the chief's checkpoints go.
      io_device: the device whose filesystem reads and writes them (None: each
        variable's host, TensorFlow's default). A remote TPU's variables live on
        its hosts, which cannot see this client's local directory (N4):
        ``client_io_device`` names this client's.
    """

    def __init__(self, model, strategy: tf.distribute.Strategy, directory: str, io_device: str | None = None):
        self.directory = directory
        self.options = tf.train.CheckpointOptions(experimental_io_device=io_device)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="podbench_global_step")
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer, step=self.step)
        self.reader = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=MAX_TO_KEEP)
        extended = strategy.extended
        self._temporary = extended._in_multi_worker_mode() and not extended.should_checkpoint  # noqa: SLF001
        self.writer = self.reader
        if self._temporary:
            self.writer = tf.train.CheckpointManager(self.checkpoint, temporary_dir(
                directory, strategy.cluster_resolver.task_id), max_to_keep=1)

    def save(self, step: int) -> str:
        """Writes the state after ``step``; returns the path (the temporary one on a non-chief worker)."""
        self.step.assign(step)
        try:
            path = self.writer.save(checkpoint_number=step, options=self.options)
        except (tf.errors.OpError, OSError) as err:
            full = directory_full(self.writer.directory)
            if full is None:
                raise
            raise RunFailed(full) from err
        if self._temporary:
            tf.io.gfile.rmtree(self.writer.directory)
        return path

    def latest(self) -> str | None:
        return self.reader.latest_checkpoint

    def bytes(self, path: str) -> int | None:
        return checkpoint_bytes(path)

    def candidates(self) -> tuple[list[str], list[tuple[str, str]]]:
        """(every checkpoint in the directory, newest first; [(path, why)] of those the state file
        names whose files are gone): the state file's, and any it lost track of."""
        found = {p[: -len(".index")] for p in tf.io.gfile.glob(f"{self.directory.rstrip('/')}/ckpt-*.index")}
        state = tf.train.get_checkpoint_state(self.directory)
        named = list(state.all_model_checkpoint_paths) if state else []
        missing = [(p, "its files are missing") for p in named
                   if p not in found and not tf.io.gfile.exists(p + ".index")]
        return (sorted(found, key=checkpoint_number, reverse=True),
                sorted(missing, key=lambda m: checkpoint_number(m[0]), reverse=True))

    def restore_intact(self) -> tuple[str | None, int, list[tuple[str, str]]]:
        """Restores the newest checkpoint whose every tensor reads back whole (checksums checked).

        Returns:
          (its path, its step, [(path, why) of each newer one passed over]);
          (None, 0, []) when the directory holds no checkpoint.

        Raises:
          UsageError: checkpoints are there but none restores (truncated, corrupted, another model's).
        """
        found, damaged = self.candidates()
        newest = checkpoint_number(found[0]) if found else -1
        damaged = [d for d in damaged if checkpoint_number(d[0]) > newest]
        for path in found:
            try:
                verify(path)  # the optimizer's slots restore later, inside fit: read everything now
                return path, self.restore(path), damaged
            except (tf.errors.OpError, ValueError, AssertionError, IndexError, OSError) as err:
                damaged.append((path, _first_line(err)))
        if damaged:
            newest_path, why = damaged[0]
            raise UsageError(f"no checkpoint in {self.directory} restores ({len(damaged)} tried; the newest, "
                             f"{newest_path}: {why}); if config.json was edited, restore it, else start a new "
                             "run (what was measured stays in the run directory)")
        return None, 0, []

    def restore(self, path: str) -> int:
        """Restores ``path``; returns the global step it was written after.

        The optimizer's slot variables do not exist until its first step: TensorFlow
        restores them then (deferred restoration), before any update uses them.
        """
        self.checkpoint.restore(path, options=self.options).assert_existing_objects_matched()
        return int(self.step.numpy())


def client_io_device(tpu: str | None, directory: str) -> str | None:
    """This client's device for checkpoint I/O when a remote TPU (a name, grpc://) would write a
    local ``directory`` on its own hosts; None otherwise (gs:// is seen from every host)."""
    remote_tpu = bool(tpu) and tpu != "local"
    return "/job:localhost/replica:0/task:0/device:CPU:0" if remote_tpu and "://" not in directory else None


def temporary_dir(directory: str, task_id: int) -> str:
    """Where a non-chief worker writes the checkpoint it deletes at once.

    The write itself is needed (saving all-reduces the batch-norm statistics), its
    bytes are not: for a gs:// (or any remote) directory they go to a local
    temporary directory, not N-1 uploads of the whole model thrown away (N11).
    """
    if "://" in directory:
        return tempfile.mkdtemp(prefix=f"podbench-checkpoint-worker{task_id}-")
    return f"{directory.rstrip('/')}/tmp-worker-{task_id}"


def verify(path: str) -> None:
    """Reads every tensor of the checkpoint at ``path`` (its checksums are checked as it reads).

    Raises:
      tf.errors.OpError (DataLossError...), IndexError, ValueError: truncated or corrupted.
    """
    reader = tf.train.load_checkpoint(path)
    for name in reader.get_variable_to_shape_map():
        reader.get_tensor(name)


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0][:160] if lines else ''}"


def checkpoint_bytes(path: str) -> int | None:
    """Bytes of a checkpoint's files (its data and index), or None if they cannot be listed."""
    try:
        return sum(tf.io.gfile.stat(p).length for p in tf.io.gfile.glob(path + ".*"))
    except tf.errors.OpError:
        return None


def agreement(strategy: tf.distribute.Strategy):
    """A function that makes every worker of a multi_worker run see the same decisions.

    Returns None where there is one process (nothing to agree on). The values are
    summed across workers: a flag any worker raises, every worker sees raised.
    float64 holds the integers exactly (to 2**53) on every device, NCCL's included.
    """
    if not strategy.extended._in_multi_worker_mode():  # noqa: SLF001
        return None

    @tf.function  # traced once per length: eager collectives cost far more per call
    def total(values):
        per_replica = strategy.run(tf.identity, args=(values,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def agree(values: tuple[int, ...]) -> tuple[int, ...]:
        # Each worker's value counts once, however many replicas (devices) it has.
        sums = total(tf.constant(values, tf.float64)).numpy() / strategy.extended._num_devices_per_worker  # noqa: SLF001
        return tuple(int(round(v)) for v in sums)

    return agree


class StopAndCheckpointCallback(tf_keras.callbacks.Callback):
    """The block-end decisions (bench/harness/block_end.py) at Keras's block ends and evaluation steps.

    Args: as ``BlockEnd``'s: the step timer, the stop request, the lifecycle writer, the
      checkpointer (None: none), seconds between checkpoints, the grace period, the segment,
      the agreement across workers and the step timer's clock.
    """

    def __init__(self, timer: StepTimerCallback, request: StopRequest, lifecycle: jsonl.LifecycleWriter,
                 checkpointer: Checkpointer | None = None, every_s: float | None = None,
                 grace_s: float = DEFAULT_GRACE_S, segment: int = 0, agree=None, clock=time.perf_counter):
        super().__init__()
        self.block_end = BlockEnd(timer, request, lifecycle, checkpointer, every_s, grace_s, segment, agree, clock)

    def on_train_begin(self, logs=None):
        self.block_end.begin()

    def on_train_batch_end(self, batch, logs=None):
        if self.block_end.after_block():
            self.model.stop_training = True

    def on_test_batch_end(self, batch, logs=None):
        # Under multi_worker every evaluation step is all-reduced, so the workers stop together.
        if self.block_end.during_evaluation():
            raise Interrupted(self.block_end.request.signal_name)

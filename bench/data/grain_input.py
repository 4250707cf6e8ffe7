"""The JAX engine's real data without TensorFlow: grain over the same ImageNet TFRecord shards.

The tf.data pipeline (bench/data/pipeline.py) needs TensorFlow; a GPU or TPU VM
set up for JAX often has none. This input reads the very files tf.data reads,
with grain, JAX's data loader, and bench/data/jpeg.py's numpy preprocessing.

Random access without a conversion: grain samples records by number, and a
TFRecord file has no index, so one is built when the input starts by walking
the record headers (bench/data/tfrecord.py: 12 bytes read a record; measured
here 9 us a record on a local disk, ~11 s for ImageNet's 1.28 M, in each process). Converting to grain's
ArrayRecord format would give an index for free, but it is a copy of ImageNet
(~140 GB) made and kept beside the shards; reading the shards as they are
leaves nothing to convert, and both engines read the same bytes.

Per process: its contiguous 1/N share of the split's records (``process_share``);
training shuffles the share with the spec's seed, reshuffles it every epoch and
repeats it forever; validation reads it once, in order. Each record is checked
(bench/data/record_problems.py) and decoded in ``worker_count`` processes, which
batch training images themselves; validation's images are batched here, so the
last, partial batch is the only one (padded with zero-weight images, as
pipeline.py's eval_padding pads). Batches are numpy: images uint8
[B, size, size, 3], labels int32 [B] (0-based), and for padded validation the
weights float32 [B]. Images stay bytes: the device normalises them.

The iterator's position is grain's, and it is the whole state: ``get_state``
after N batches and ``set_state`` in a new process continue with batch N+1,
the same records, crops and flips (the crop's random numbers are drawn from the
seed and the record's place in the stream, not from a shared generator). A state
carries a checksum of itself, so that one damaged or edited is told, whatever the
damage, and the digest of the records it was taken over (record_index's
``RecordIndex.digest``), so that a position is never taken back over other data.

Worker processes hand their batches over in shared memory. Closed in the middle
of a stream (a bad record, the end of a run), the batches grain had prefetched
are garbage in reference cycles, and grain frees a collected batch's memory in a
thread of its own: ``close`` collects them and waits for that thread, so that a
process ending on a bad record leaves nothing in /dev/shm and no warning from
Python's resource tracker (which frees what is left at exit, and says so).
"""
from __future__ import annotations

import gc
import hashlib
import json
import time
import weakref
from typing import Callable, Iterator, NamedTuple

import grain
import numpy as np

from bench.cluster import gpus
from bench.data import grain_records, records
from bench.data.record_index import TFRecordSource, index_of
from bench.data.spec import DataCounts, InputSpec
from bench.errors import UsageError
from methodology.throughput import StepRecord

# Cores left to the training process itself when the workers' number is not given: JAX's
# dispatch and the host-to-device copies each want one.
CORES_FOR_TRAINING = 2
MAX_DEFAULT_WORKERS = 64
# Within each worker, threads read records and decode them (libjpeg-turbo releases the GIL
# for part of a decode); the buffer holds this many records ahead, decoded.
READ_THREADS = 4
READ_AHEAD_RECORDS = 64
WORKER_BUFFER_BATCHES = 2
STATE_FORMAT = 2  # 2: a checksum and the data's digest



def default_worker_count(cpus: int | None = None) -> int:
    """Worker processes when none are asked for: the host's usable cores less CORES_FOR_TRAINING, at most
    MAX_DEFAULT_WORKERS; 0 (decode in the training process) with two cores or fewer.

    One process a host: several training processes on one host should divide the cores between them.
    """
    if cpus is None:
        cpus = gpus.usable_cpus()
    return max(0, min(cpus - CORES_FOR_TRAINING, MAX_DEFAULT_WORKERS))


def process_share(num_records: int, process_index: int, process_count: int) -> range:
    """The contiguous records of one process: the first ``num_records % process_count`` get one more."""
    if not 0 <= process_index < process_count:
        raise ValueError(f"process_index must be in [0, {process_count}), got {process_index}")
    base, extra = divmod(num_records, process_count)
    start = process_index * base + min(process_index, extra)
    return range(start, start + base + (process_index < extra))


def count_examples(source: str, data_dir: str | None, num_classes: int,
                   splits: tuple[str, ...] = ("train",)) -> DataCounts:
    """What the TFRecord shards hold (bench/data/pipeline.py's count, without TensorFlow).

    Args:
      source: "synthetic" (nothing to count) or "imagenet" (TFRecord shards); "tfds" is refused.
      data_dir: a local directory (a bucket mounted with gcsfuse is one).
      num_classes: unused (the records' labels are checked as they are read); kept for pipeline.py's signature.
      splits: the splits that will be read.

    Raises:
      UsageError: --data tfds, a gs:// URI, missing directory, no shards, a truncated shard.
    """
    del num_classes
    if source == "synthetic":
        return DataCounts()
    check_readable(source, data_dir)
    files = {split: tuple(records.list_shards(data_dir, split)) for split in splits}
    examples = {split: records.num_examples(f, split) for split, f in files.items()}
    return DataCounts(examples.get("train"), examples.get("validation"), files.get("train", ()),
                      files.get("validation", ()))


def _refuse_what_cannot_run(spec: InputSpec, process_index: int, process_count: int,
                            worker_count: int | None) -> None:
    check_readable(spec.source, spec.data_dir)
    if spec.cache:
        raise UsageError("--cache keeps tf.data's records in memory; the grain input reads records by their "
                         "place, which the OS page cache keeps for data that fits in RAM: leave --cache off")
    if not 0 <= process_index < process_count:
        raise UsageError(f"process {process_index} of {process_count} does not exist; processes are numbered "
                         f"0..{process_count - 1}")
    if worker_count is not None and worker_count < 0:
        raise UsageError(f"worker count must be 0 (decode in this process) or more, got {worker_count}")


def check_readable(source: str, data_dir: str | None) -> None:
    """Refuses, in one line, what the grain input cannot read: --data tfds, a gs:// URI.

    Raises:
      UsageError: either, with what to do instead.
    """
    if source == "tfds":
        raise UsageError("--data tfds is read through TensorFlow Datasets, which the grain input does not use: "
                         "give the TFRecord shards with --data imagenet, or read TFDS with --framework tensorflow")
    if data_dir is None or "://" in data_dir:
        raise UsageError(f"the grain input reads local files, not {data_dir}: copy the shards to a local disk "
                         "or mount the bucket (gcsfuse), and give that directory")


class GrainInput:
    """One process's real-data input through grain: batches, their position, and the records skipped.

    A batch is ``spec.per_replica_batch_size`` images: give the process's batch there (its replicas'
    batches together), as the process's one pipeline feeds them all.

    Attributes:
      spec: what the input produces (source "imagenet"; ``image_dtype`` is the device's business:
        images here are always bytes).
      worker_count: grain's worker processes (0: decoding in this process).
      share: this process's records of the split (numbers into ``index``).
      index: every record of the split.
    """

    def __init__(self, spec: InputSpec, counts: DataCounts, process_index: int = 0, process_count: int = 1,
                 worker_count: int | None = None, encoded: bool = False):
        """Indexes the split's shards (every record header is read) and checks what cannot run.

        Args:
          spec: the input's spec; its split's shards are ``counts``'.
          counts: from ``count_examples`` (or pipeline.py's), for the same data.
          process_index, process_count: this process among those reading the data; each reads its own share.
          worker_count: grain's worker processes; None: ``default_worker_count()``.
          encoded: training batches' images left as JPEGs for the device to decode: an ``EncodedImages`` in
            place of the decoded array, the same records with the same crops and flips (and the same positions).

        Raises:
          UsageError: a source or setting the grain input cannot read, a broken shard, shards holding
            another number of records than ``counts`` says, or a share with no records.
        """
        _refuse_what_cannot_run(spec, process_index, process_count, worker_count)
        files = counts.train_files if spec.training else counts.eval_files
        if not files:
            raise UsageError(f"no {spec.split} shards were counted; count the {spec.split} split with count_examples")
        self.spec = spec
        self.encoded = encoded and spec.training
        self.worker_count = default_worker_count() if worker_count is None else worker_count
        self.index = index_of(files)
        expected = counts.train_examples if spec.training else counts.eval_examples
        if len(self.index) != expected:
            why = ("ImageNet's published count, taken for its 1024/128 shards: these are not ImageNet's; re-create "
                   "them in another number of shards" if len(files) == records.IMAGENET_SHARDS[spec.split]
                   else "the shards changed since they were counted; count them again")
            raise UsageError(f"the {spec.split} shards hold {len(self.index):,} records, not the {expected:,} "
                             f"counted ({why})")
        self.share = process_share(len(self.index), process_index, process_count)
        if not self.share:
            raise UsageError(f"{len(self.index)} {spec.split} records cannot feed {process_count} processes: "
                             "each needs one at least; use fewer processes")
        self._placement = {"process_index": process_index, "process_count": process_count}
        self._iterator = None
        self._streams: weakref.WeakSet = weakref.WeakSet()  # the iterators ``batches`` gave out
        self._skipped = 0
        self._delivered = 0  # validation's records handed out, to count what was skipped at its end

    @property
    def skipped_records(self) -> int | None:
        """Records dropped by --skip-corrupt so far (None without it). Validation counts its skips once its pass ends."""
        return self._skipped if self.spec.skip_corrupt else None

    def batches(self) -> Iterator[tuple[np.ndarray, ...]]:
        """This process's batches: (images, labels), or (images, labels, weights) for padded validation.

        Training: one endless stream, which every call continues. Validation: each
        call is a new pass over the share, in order; without padding it ends after
        its last full batch (the rest dropped, as tf.data's drop_remainder drops
        it), with padding the last batch is filled with zero-weight images and
        zero-weight batches follow without end, as pipeline.py's do. ``close`` ends
        every such iterator: the last batch each holds is let go with the rest.
        """
        stream = self._batches()
        self._streams.add(stream)
        return stream

    def _batches(self) -> Iterator[tuple[np.ndarray, ...]]:
        if not self.spec.training:
            self.close()  # a new pass
            self._skipped = self._delivered = 0
        size = self.spec.per_replica_batch_size
        while (batch := next(self._grain_iterator(), None)) is not None:
            problem = next((str(problem) for problem in batch["problem"] if problem), None)  # the earliest
            if problem is not None:
                # This batch's arrays, and the last one's, may be grain's shared memory: dropped before close
                # frees it, not when the traceback goes (perhaps as the process ends, too late to free it).
                batch = images = labels = None
                self.close()
                raise UsageError(problem)
            images, labels = (EncodedImages(batch["jpeg"], batch["offsets"], batch["window"], batch["flip"])
                              if self.encoded else batch["image"]), batch["label"]
            if self.spec.training:
                self._skipped += int(batch["skipped"].sum())
                yield images, labels
                continue
            self._delivered += len(labels)
            if self.spec.eval_padding:
                yield _padded(images, labels, size)
            elif len(labels) == size:
                yield images, labels
        self._skipped = len(self.share) - self._delivered  # validation: the pass is over, every record seen
        nothing = np.zeros((0, *batch_shape(self.spec)[1:]), np.uint8), np.zeros(0, np.int32)
        while self.spec.eval_padding:
            yield _padded(*nothing, size)

    def get_state(self) -> dict:
        """Where training's stream stands, JSON-serialisable: grain's iterator position, what it must be
        resumed with, the records' digest, and a checksum of all that. (Validation needs none: each pass
        starts again.)"""
        state = {"format": STATE_FORMAT, "grain": self._grain_iterator().get_state(), **self._setup(),
                 "data": self.index.digest, "skipped_records": self._skipped, "delivered_records": self._delivered}
        state = json.loads(json.dumps(state))  # as it is read back (grain's tuples lists, its keys strings)
        return {**state, "checksum": _checksum(state)}

    def set_state(self, state: dict) -> None:
        """Continues from ``state`` (``get_state``'s): the next batch is the one that followed it.

        Raises:
          UsageError: a damaged state (``state_problem``); one saved with another worker count, placement,
            split, seed, batch size or number of records (the order of the records depends on each); or over
            other data (the records' digest differs).
        """
        problem = state_problem(state)
        if problem is not None:
            raise UsageError(f"the saved input position is {problem}")
        if state["data"] != self.index.digest:
            raise UsageError("the training data changed since the position was saved (its records are not the "
                             "ones indexed then: regenerated or replaced?)")
        for key, value in self._setup().items():
            if state[key] != value:
                raise UsageError(f"the input position was saved with {key} {state[key]!r} and this input has "
                                 f"{value!r} (the order of the records depends on it)")
        self._grain_iterator().set_state(state["grain"])
        self._skipped, self._delivered = state["skipped_records"], state["delivered_records"]

    def _setup(self) -> dict:
        """What the order of the records depends on: a state resumes only under the same."""
        return {"worker_count": self.worker_count, **self._placement, "records": len(self.index),
                "split": self.spec.split, "seed": self.spec.seed, "batch_size": self.spec.per_replica_batch_size}

    def close(self) -> None:
        """Stops grain's worker processes and frees the shared memory of the batches they had made."""
        for stream in list(self._streams):  # each holds the last batch it gave, perhaps grain's shared memory
            if not stream.gi_running:  # (one that closes its input itself ends as it raises)
                stream.close()
        if self._iterator is not None:
            close = getattr(self._iterator, "close", None)
            if close is not None:
                close()
            self._iterator = None
            _free_shared_memory()

    def __enter__(self) -> GrainInput:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _grain_iterator(self):
        if self._iterator is None:
            self._iterator = iter(self._dataset())
        return self._iterator

    def _dataset(self):
        spec = self.spec
        records_ = grain.MapDataset.source(TFRecordSource(self.index)).seed(spec.seed)
        records_ = records_[self.share.start:self.share.stop]
        preprocess = grain_records.Preprocess(self.index, spec.image_size, spec.num_classes, self.encoded)
        if spec.training:
            records_ = records_.shuffle().repeat(None)  # reshuffled each epoch
        images = records_.random_map(preprocess) if spec.training and spec.augment else records_.map(preprocess)
        stream = grain_records.SkipCounted(images.to_iter_dataset(grain.ReadOptions(num_threads=READ_THREADS,
                                                                       prefetch_buffer_size=READ_AHEAD_RECORDS)),
                              spec.skip_corrupt, len(self.share))
        if spec.training:  # whole batches from each worker: one transfer a batch
            packed = grain_records.pack_encoded if self.encoded else None
            return _in_workers(stream.batch(spec.per_replica_batch_size, drop_remainder=True, batch_fn=packed),
                               self.worker_count)
        # Validation is batched here: each worker's last batch would be partial, and only the pass's last may be.
        return _in_workers(stream, self.worker_count).batch(spec.per_replica_batch_size, drop_remainder=False)


class EncodedImages(NamedTuple):
    """A training batch's images left encoded (``GrainInput(encoded=True)``): the i-th JPEG is
    ``jpeg[offsets[i]:offsets[i + 1]]``, to be cropped to ``window[i]`` (top, left, height, width, in the full
    image's pixels) and flipped left to right where ``flip[i]``, as bench/data/jpeg.py's ``train_image`` would."""

    jpeg: np.ndarray  # uint8, the batch's JPEGs end to end
    offsets: np.ndarray  # int64 [B + 1]
    window: np.ndarray  # int32 [B, 4]
    flip: np.ndarray  # bool [B]


def state_problem(state) -> str | None:
    """What makes a saved state unusable, as it stands, before any input reads it; None: whole.

    A state is whole when its checksum is the checksum of the rest: the state is
    then exactly what ``get_state`` wrote, so every key is there with its type and
    a value ``get_state`` gave. Whatever the damage (a file cut short and mended, a
    list, an empty object, a key deleted or edited, a value out of range), it is
    told here, in the same words, rather than raised deep in grain or in a worker.
    """
    if not isinstance(state, dict):
        return f"damaged (a JSON {type(state).__name__}, not an object)"
    if state.get("format") != STATE_FORMAT:
        return f"from another version of the grain input (format {state.get('format')!r}, not {STATE_FORMAT})"
    rest = {key: value for key, value in state.items() if key != "checksum"}
    if state.get("checksum") != _checksum(rest):
        return "damaged (its checksum does not match its contents: edited, or written in part)"
    return None


def saved_reading(state: dict) -> tuple[int, int]:
    """(seed, worker count) a whole state (``state_problem`` None) was read with: the order of its records."""
    return state["seed"], state["worker_count"]


def _checksum(state: dict) -> str:
    """SHA-256 of ``state`` as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(state, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _free_shared_memory() -> None:
    """Frees the shared memory of grain's batches no longer referenced, before returning.

    The prefetched batches sit in grain's reference cycles: collected now. A
    collected batch does not free its memory itself: grain 0.2 queues that to a
    thread pool of one thread (``SharedMemoryArray.enable_async_del(1)``), whose
    queue a process ending at once (a bad record's one line, exit 2) does not wait
    for: Python's resource tracker then unlinks the rest and warns of "leaked
    shared_memory objects", after the error line. A task queued behind them on that
    one thread runs after them: waiting for it waits for them.
    """
    gc.collect()
    pool = getattr(grain.multiprocessing.SharedMemoryArray, "_del_thread_pool", None)
    if pool is not None:
        pool.apply(int)  # any callable: the wait is the point


def batch_shape(spec: InputSpec) -> tuple[int, int, int, int]:
    """[B, size, size, 3]: the images of one batch."""
    return spec.per_replica_batch_size, spec.image_size, spec.image_size, 3


def _padded(images: np.ndarray, labels: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(images, labels, weights) filled to ``size`` with zero images of label 0 and weight 0."""
    missing = size - len(labels)
    weights = np.concatenate([np.ones(len(labels), np.float32), np.zeros(missing, np.float32)])
    if missing == 0:
        return images, labels, weights
    return (np.concatenate([images, np.zeros((missing, *images.shape[1:]), np.uint8)]),
            np.concatenate([labels, np.zeros(missing, np.int32)]), weights)


def _in_workers(stream, worker_count: int):
    """``stream`` run in ``worker_count`` processes (as is with 0)."""
    if worker_count == 0:
        return stream
    _absl_flags_parsed()
    return stream.mp_prefetch(grain.MultiprocessingOptions(num_workers=worker_count,
                                                           per_worker_buffer_size=WORKER_BUFFER_BATCHES))


def _absl_flags_parsed() -> None:
    """grain 0.2's worker processes read an absl flag, which fails unless absl's flags were parsed
    (google/grain#1355; a script without absl.app never parses them): take every flag's default."""
    from absl import flags  # noqa: PLC0415 (grain's own dependency)

    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()


def time_input(source: GrainInput, num_batches: int, clock: Callable[[], float] = time.perf_counter) -> list[StepRecord]:
    """The input alone, timed as pipeline.py's ``time_batches`` times tf.data: (batches done, clock) after each,
    record 0 before the first pull (its interval includes the start-up: workers, the first reads).

    Raises:
      UsageError: a bad record (named), or a split too small for ``num_batches``.
    """
    log = [StepRecord(0, clock())]
    batches = source.batches()
    for done in range(1, num_batches + 1):
        if next(batches, None) is None:
            raise UsageError(f"the data ran out after {done - 1} of {num_batches} batches; lower the number of "
                             "batches or the batch size")
        log.append(StepRecord(done, clock()))
    return log

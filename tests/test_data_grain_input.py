"""bench/data/grain_input.py: real grain over real TFRecord shards of real JPEGs (tests/imagenet_fixture.py),
in this process and in grain's worker processes, against the tf.data pipeline on the same records."""
import inspect
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bench.data import grain_input, jpeg, pipeline, record_index, records, tfrecord
from bench.data.grain_input import GrainInput, count_examples
from bench.data.spec import DataCounts, InputSpec
from bench.errors import UsageError
from console import ENV, REPO, runs_without, shared_memory_left
from imagenet_fixture import REASONS, write_bad_record_dir, write_imagenet_dir

NUM_CLASSES = 5
SIZE = 32


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """120 training records in 3 shards, 30 validation records in 2."""
    return str(write_imagenet_dir(tmp_path_factory.mktemp("imagenet"), num_classes=NUM_CLASSES))


def spec_of(data_dir, **changes) -> InputSpec:
    return InputSpec(**{"source": "imagenet", "image_size": SIZE, "num_classes": NUM_CLASSES,
                        "per_replica_batch_size": 8, "data_dir": str(data_dir), "image_dtype": "uint8", **changes})


def input_of(spec: InputSpec, **kwargs) -> GrainInput:
    return GrainInput(spec, count_examples(spec.source, spec.data_dir, NUM_CLASSES, (spec.split,)),
                      **{"worker_count": 0, **kwargs})


def take(source: GrainInput, n: int) -> list[tuple[np.ndarray, ...]]:
    batches = source.batches()
    return [next(batches) for _ in range(n)]


def centre_crops(data_dir, split: str) -> dict[bytes, int]:
    """Every record's evaluation image (bytes) -> its 0-based label: how a record is recognised in a batch."""
    crops = {}
    for path in records.list_shards(data_dir, split):
        for raw in tf.data.TFRecordDataset(path):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            crops[jpeg.eval_image(feature[records.ENCODED_KEY].bytes_list.value[0], SIZE).tobytes()] = (
                feature[records.LABEL_KEY].int64_list.value[0] - records.LABEL_OFFSET)
    return crops


def recognised(batches, crops: dict[bytes, int]) -> list[bytes]:
    """The records in ``batches`` (images must be evaluation crops), each checked against its label."""
    seen = []
    for images, labels, *weights in batches:
        for n, (image, label) in enumerate(zip(images, labels)):
            if weights and weights[0][n] == 0:
                continue
            assert crops[image.tobytes()] == label
            seen.append(image.tobytes())
    return seen


# --- counting, without TensorFlow ---------------------------------------------------------------------

def test_counts_are_the_tf_data_pipelines(data_dir):
    splits = ("train", "validation")
    assert count_examples("imagenet", data_dir, NUM_CLASSES, splits) == pipeline.count_examples(
        "imagenet", data_dir, NUM_CLASSES, splits)
    assert count_examples("synthetic", None, NUM_CLASSES) == DataCounts()


@pytest.mark.parametrize("source, directory, message", [
    pytest.param("tfds", "/data", "--data tfds is read through TensorFlow Datasets", id="tfds"),
    pytest.param("imagenet", "gs://bucket/imagenet", "reads local files, not gs://bucket/imagenet", id="bucket"),
])
def test_what_the_grain_input_cannot_read_is_one_line(source, directory, message):
    with pytest.raises(UsageError, match=message) as raised:
        count_examples(source, directory, NUM_CLASSES)
    assert "\n" not in str(raised.value)


# --- training --------------------------------------------------------------------------------------------

def test_training_batches_are_bytes_and_zero_based_labels(data_dir):
    with input_of(spec_of(data_dir)) as source:
        images, labels = take(source, 1)[0]
    assert images.shape == (8, SIZE, SIZE, 3) and images.dtype == np.uint8
    assert labels.shape == (8,) and labels.dtype == np.int32 and 0 <= labels.min() and labels.max() < NUM_CLASSES


def test_the_seed_decides_the_order_and_the_crops(data_dir):
    def first(seed):
        with input_of(spec_of(data_dir, seed=seed)) as source:
            return take(source, 2)

    a, b, c = first(1), first(1), first(2)
    assert all(np.array_equal(x, y) for batch_a, batch_b in zip(a, b) for x, y in zip(batch_a, batch_b))
    assert not np.array_equal(a[0][0], c[0][0])


def test_each_epoch_is_every_record_once_in_a_new_order(data_dir):
    crops = centre_crops(data_dir, "train")
    with input_of(spec_of(data_dir, augment=False)) as source:  # centre crops: each record recognisable
        first, second = take(source, 15), take(source, 15)
    assert sorted(recognised(first, crops)) == sorted(recognised(second, crops)) == sorted(crops)
    assert recognised(first, crops) != recognised(second, crops)


@pytest.mark.parametrize("split, batches", [pytest.param("train", 60 // 4, id="train_epoch"),
                                            pytest.param("validation", None, id="validation_pass")])
def test_two_processes_read_disjoint_shares_covering_the_split(data_dir, split, batches):
    crops = centre_crops(data_dir, split)
    shares = []
    for process in range(2):
        spec = spec_of(data_dir, split=split, augment=False, per_replica_batch_size=4 if split == "train" else 1)
        with input_of(spec, process_index=process, process_count=2) as source:
            shares.append(recognised(take(source, batches) if batches else source.batches(), crops))
    assert len(shares[0]) == len(shares[1]) == len(crops) // 2
    assert not set(shares[0]) & set(shares[1]) and set(shares[0]) | set(shares[1]) == set(crops)


# What is left of shared memory the script made once its inputs are closed: nothing (close frees grain's batches
# and waits for grain's thread that frees them: bench/data/grain_input.py), and nothing of this process runs
# to free more. console.shared_memory_left's source, run in the script.
SHARED_MEMORY_LEFT = inspect.getsource(shared_memory_left)

RESUME = SHARED_MEMORY_LEFT + """
import hashlib, json, os, sys
from bench.data.grain_input import GrainInput, count_examples
from bench.data.spec import InputSpec

def digests(source, n):
    batches = source.batches()
    return [hashlib.sha256(b"".join(a.tobytes() for a in next(batches))).hexdigest() for _ in range(n)]

def main(data_dir, workers):
    spec = InputSpec("imagenet", 32, 5, 8, data_dir=data_dir, image_dtype="uint8", seed=5)
    counts = count_examples("imagenet", data_dir, 5)
    with GrainInput(spec, counts, worker_count=workers) as source:
        digests(source, 13)
        state = json.loads(json.dumps(source.get_state()))
        expected = digests(source, 5)
    with GrainInput(spec, counts, worker_count=workers) as resumed:
        resumed.set_state(state)
        got = digests(resumed, 5)
    with GrainInput(spec, counts, worker_count=workers) as fresh:
        from_the_start = digests(fresh, 5)
    return {"expected": expected, "got": got, "from_the_start": from_the_start}

if __name__ == "__main__":
    before = set(os.listdir("/dev/shm"))
    result = main(sys.argv[1], int(sys.argv[2]))
    print(json.dumps({**result, "shared_memory_left": shared_memory_left(before)}))
"""


def in_a_process(code: str, *args) -> subprocess.CompletedProcess:
    """``code`` run as a script of its own: grain's worker processes bring Python's resource tracker, which
    lives as long as its parent (here that script, not the test session, which allows no process left behind)."""
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=ENV, cwd=REPO)


@pytest.mark.parametrize("workers", [pytest.param(0, id="in_process"), pytest.param(2, id="two_workers")])
def test_a_restored_state_continues_exactly_where_it_stopped(data_dir, workers):
    """N batches, the state (through JSON), M more; a fresh input restored from the state gives the same M.
    Past an epoch's end (120 records, 8 a batch), so the reshuffle is resumed too."""
    done = in_a_process(RESUME, data_dir, workers)
    assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["got"] == result["expected"] and result["shared_memory_left"] == []
    assert result["from_the_start"][0] != result["expected"][0]  # the test can tell a restore from none


@pytest.mark.parametrize("change, name", [pytest.param(dict(worker_count=1), "worker_count", id="workers"),
                                          pytest.param(dict(process_count=2), "process_count", id="processes")])
def test_a_state_from_another_setup_is_refused(data_dir, change, name):
    with input_of(spec_of(data_dir)) as source:
        state = source.get_state()
    with input_of(spec_of(data_dir), **change) as other, pytest.raises(UsageError, match=f"saved with {name}") as raised:
        other.set_state(state)
    assert "\n" not in str(raised.value)


def _damaged(state: dict, how: str):
    """``state`` damaged as a disk, an interrupted copy or a hand edit leaves a saved position."""
    edited = json.loads(json.dumps(state))
    if how == "list":
        return []
    if how == "empty":
        return {}
    if how == "key_missing":
        del edited["grain"]
    elif how == "key_of_another_type":
        edited["skipped_records"] = "3"
    elif how == "value_out_of_range":
        edited["delivered_records"] = -1
    elif how == "grains_position_edited":
        edited["grain"] = {"next_index": -5}
    elif how == "checksum_missing":
        del edited["checksum"]
    return edited


@pytest.mark.parametrize("how, problem", [
    pytest.param("list", "damaged (a JSON list, not an object)", id="list"),
    pytest.param("empty", "from another version of the grain input (format None, not 2)", id="empty_object"),
    *[pytest.param(how, "damaged (its checksum does not match its contents: edited, or written in part)", id=how)
      for how in ("key_missing", "key_of_another_type", "value_out_of_range", "grains_position_edited",
                  "checksum_missing")],
])
def test_a_damaged_state_is_refused_in_one_line_before_anything_reads_it(data_dir, how, problem):
    with input_of(spec_of(data_dir)) as source:
        take(source, 2)
        state = source.get_state()
        assert grain_input.state_problem(state) is None
        damaged = _damaged(state, how)
        assert grain_input.state_problem(damaged) == problem
        with pytest.raises(UsageError) as raised:
            source.set_state(damaged)
        assert str(raised.value) == f"the saved input position is {problem}"


def test_a_state_over_other_data_is_refused_and_over_a_copy_of_the_same_data_taken(data_dir, tmp_path):
    """Data regenerated under the same shard names and record counts, other images: the records' digest tells
    it. The same shards copied to another directory (new modification times) are the same data."""
    with input_of(spec_of(data_dir)) as source:
        take(source, 2)
        state = source.get_state()
        expected = take(source, 1)[0]
    other = write_imagenet_dir(tmp_path / "other", num_classes=NUM_CLASSES, seed=7)
    with input_of(spec_of(other)) as regenerated, pytest.raises(UsageError) as raised:
        regenerated.set_state(state)
    assert str(raised.value) == ("the training data changed since the position was saved (its records are not the "
                                 "ones indexed then: regenerated or replaced?)")
    copy = shutil.copytree(data_dir, tmp_path / "copy", copy_function=shutil.copyfile)  # new modification times
    with input_of(spec_of(copy)) as copied:
        copied.set_state(state)
        assert all(np.array_equal(a, b) for a, b in zip(take(copied, 1)[0], expected))


# --- evaluation ---------------------------------------------------------------------------------------------

def eval_spec(data_dir, batch, **changes) -> InputSpec:
    return spec_of(data_dir, **{"split": "validation", "per_replica_batch_size": batch, "eval_padding": True, **changes})


def test_evaluation_pixels_are_the_tf_data_pipelines(data_dir):
    """The same records through both: each of our images is one of tf.data's, within 1 in 255 everywhere."""
    tf_pipeline = pipeline.make_pipeline(eval_spec(data_dir, 1, eval_padding=False),
                                         pipeline.count_examples("imagenet", data_dir, NUM_CLASSES, ("validation",)))
    theirs = [(x[0].numpy().astype(int), int(y[0])) for x, y in tf_pipeline.dataset_fn(None)]
    with input_of(eval_spec(data_dir, 4)) as source:
        ours = [(image.astype(int), int(label)) for images, labels, weights in take(source, 8)
                for image, label, weight in zip(images, labels, weights) if weight == 1]
    assert len(ours) == len(theirs) == 30
    matches = [[n for n, (other, other_label) in enumerate(theirs)
                if other_label == label and np.abs(image - other).max() <= 1] for image, label in ours]
    assert sorted(n for match in matches for n in match) == list(range(30))  # one each, each once


@pytest.mark.parametrize("batch", [4, 7, 30, 32])
def test_every_validation_record_counts_once(data_dir, batch):
    crops = centre_crops(data_dir, "validation")
    steps = -(-30 // batch)
    with input_of(eval_spec(data_dir, batch)) as source:
        batches = take(source, steps + 2)  # padding goes on after the records
    assert sorted(recognised(batches, crops)) == sorted(crops)
    weights = np.concatenate([w for _, _, w in batches])
    assert weights.sum() == 30 and set(weights[30:]) == {0.0}
    padding = [(int(y), image.any()) for images, labels, w in batches for image, y, wi in zip(images, labels, w) if wi == 0]
    assert padding == [(0, False)] * ((steps + 2) * batch - 30)


def test_each_pass_of_validation_starts_again(data_dir):
    with input_of(eval_spec(data_dir, 8, eval_padding=False)) as source:
        first, second = list(source.batches()), list(source.batches())
    assert len(first) == len(second) == 3  # 30 records: 3 full batches, the remainder dropped as tf.data drops it
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(first, second))


# --- bad records ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["label_out_of_range", "png_payload", "truncated_jpeg", "corrupt_jpeg",
                                  "missing_image"])
def test_a_bad_record_is_named_with_shard_record_byte_and_fix(tmp_path, kind):
    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path, kind=kind, num_classes=NUM_CLASSES)
    offset = record_index.index_records([bad_file]).offset[bad_index]
    with input_of(eval_spec(data_dir, 1, eval_padding=False)) as source, pytest.raises(UsageError) as raised:
        list(source.batches())
    line = str(raised.value)
    assert line.startswith(f"bad input data: {bad_file}, record {bad_index} (byte {offset}): ")
    assert REASONS[kind] in line and line.endswith("or pass --skip-corrupt to skip and count bad records")
    assert "\n" not in line
    # A label above the range (1001 here) may be the run's class count, not the data: said first.
    assert ("pass --num-classes" in line) == (kind == "label_out_of_range")


BAD_IN_A_WORKER = SHARED_MEMORY_LEFT + """
import os, sys
from bench.data.grain_input import GrainInput, count_examples
from bench.data.spec import InputSpec
from bench.errors import UsageError

if __name__ == "__main__":
    before = set(os.listdir("/dev/shm"))
    spec = InputSpec("imagenet", 32, 5, 1, data_dir=sys.argv[1], split="validation")
    try:
        with GrainInput(spec, count_examples("imagenet", sys.argv[1], 5, ("validation",)), worker_count=2) as source:
            list(source.batches())
    except UsageError as err:
        print(err)
    print(f"shared memory left: {shared_memory_left(before)}")
"""


def test_a_bad_record_found_in_a_worker_process_is_the_same_line(tmp_path):
    """Found in one of grain's workers, raised in the training process: the one line, and nothing on stderr."""
    data_dir, bad_file, bad_index = write_bad_record_dir(tmp_path, kind="label_out_of_range", num_classes=NUM_CLASSES)
    done = in_a_process(BAD_IN_A_WORKER, data_dir)
    assert done.returncode == 0 and not done.stderr, done.stderr[-3000:]
    line, left = done.stdout.splitlines()
    assert line.startswith(f"bad input data: {bad_file}, record {bad_index} (byte ") and left == "shared memory left: []"


@pytest.mark.parametrize("kind", ["missing_label", "label_zero", "png_payload", "corrupt_jpeg"])
def test_skip_corrupt_drops_and_counts_in_validation(tmp_path, kind):
    data_dir, _, _ = write_bad_record_dir(tmp_path, kind=kind, num_classes=NUM_CLASSES)
    with input_of(eval_spec(data_dir, 1, eval_padding=False, skip_corrupt=True)) as source:
        delivered = sum(len(labels) for _, labels in source.batches())
        assert (delivered, source.skipped_records) == (11, 1)


def test_skip_corrupt_counts_in_training(tmp_path):
    data_dir, _, _ = write_bad_record_dir(tmp_path / "v", kind="png_payload", num_classes=NUM_CLASSES)
    for shard in range(2):  # the same shards as a training split
        shutil.copy(data_dir / records.shard_name("validation", shard, 2), tmp_path / records.shard_name("train", shard, 2))
    with input_of(spec_of(tmp_path, per_replica_batch_size=1, skip_corrupt=True)) as source:
        take(source, 11 * 3)  # three epochs of the 11 good records
        assert source.skipped_records in (2, 3)  # the third epoch's bad record may come after its last good one
    with input_of(spec_of(tmp_path, per_replica_batch_size=1)) as strict:
        assert strict.skipped_records is None


def test_every_record_bad_is_said_not_spun_on(tmp_path):
    for shard in range(2):
        tfrecord.write_records(str(tmp_path / records.shard_name("train", shard, 2)), [b"junk"] * 3)
    with input_of(spec_of(tmp_path, skip_corrupt=True)) as source, pytest.raises(UsageError, match="every one"):
        take(source, 1)


# --- what cannot run, said before anything is read ---------------------------------------------------------

@pytest.mark.parametrize("change, kwargs, message", [
    pytest.param(dict(cache=True), {}, "leave --cache off", id="cache"),
    pytest.param({}, dict(process_index=2, process_count=2), "process 2 of 2 does not exist", id="offbyone_process"),
    pytest.param({}, dict(worker_count=-1), "worker count must be 0", id="negative_workers"),
    pytest.param({}, dict(process_index=120, process_count=200), "120 train records cannot feed 200 processes",
                 id="offbyone_too_many_processes"),
])
def test_settings_the_grain_input_cannot_run(data_dir, change, kwargs, message):
    with pytest.raises(UsageError, match=message) as raised:
        input_of(spec_of(data_dir, **change), **kwargs)
    assert "\n" not in str(raised.value)


def test_shards_holding_another_count_than_counted(data_dir):
    counts = count_examples("imagenet", data_dir, NUM_CLASSES)
    wrong = DataCounts(121, None, counts.train_files)
    with pytest.raises(UsageError, match=r"hold 120 records, not the 121 counted \(the shards changed since"):
        GrainInput(spec_of(data_dir), wrong, worker_count=0)


@pytest.mark.parametrize("cpus, workers", [(1, 0), (2, 0), (3, 1), (16, 14), (96, 64)])
def test_default_worker_count(cpus, workers):
    assert grain_input.default_worker_count(cpus) == workers


@pytest.mark.parametrize("records_, count, shares", [
    pytest.param(10, 3, [range(0, 4), range(4, 7), range(7, 10)], id="uneven"),
    pytest.param(9, 3, [range(0, 3), range(3, 6), range(6, 9)], id="even"),
    pytest.param(2, 3, [range(0, 1), range(1, 2), range(2, 2)], id="offbyone_more_processes_than_records"),
])
def test_process_share(records_, count, shares):
    assert [grain_input.process_share(records_, i, count) for i in range(count)] == shares


def test_time_input_records_each_batch(data_dir):
    with input_of(spec_of(data_dir)) as source:
        log = grain_input.time_input(source, 4)
    assert [r.step for r in log] == [0, 1, 2, 3, 4] and all(b.time_s >= a.time_s for a, b in zip(log, log[1:]))


def test_time_input_says_when_the_data_runs_out(data_dir):
    with input_of(eval_spec(data_dir, 8, eval_padding=False)) as source, pytest.raises(
            UsageError, match="ran out after 3 of 5 batches"):
        grain_input.time_input(source, 5)


def test_no_tensorflow_is_loaded(data_dir):
    runs_without("from bench.data.grain_input import GrainInput, count_examples\n"
                 "from bench.data.spec import InputSpec\n"
                 f"spec = InputSpec('imagenet', 32, 5, 8, data_dir={data_dir!r})\n"
                 "with GrainInput(spec, count_examples('imagenet', spec.data_dir, 5), worker_count=0) as source:\n"
                 "    next(source.batches())")

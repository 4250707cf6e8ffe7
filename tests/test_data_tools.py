"""bench/data/tools.py: `podbench data make` (folder of JPEGs -> shards) and `inspect`."""
from pathlib import Path

import pytest
import tensorflow as tf

from bench.data import records
from bench.data import tools as data_tools
from bench.errors import UsageError
from imagenet_fixture import flip_byte, jpeg_bytes, write_imagenet_dir

NUM_CLASSES = 5


def photo_folder(root: Path, per_class=(5, 3, 1)) -> Path:
    """root/<class>/*.jpg with real JPEGs; classes named out of order on purpose."""
    for c, (name, count) in enumerate(zip(["zebra", "ant", "moth"], per_class)):
        (root / name).mkdir(parents=True)
        for i in range(count):
            (root / name / f"{i}.jpg").write_bytes(jpeg_bytes(30 + i, 40 + c, seed=10 * c + i))
    return root


def stored(out: Path, split: str) -> list[tuple[int, bytes, int, int]]:
    spec = {records.LABEL_KEY: tf.io.FixedLenFeature([], tf.int64),
            records.SYNSET_KEY: tf.io.FixedLenFeature([], tf.string),
            records.HEIGHT_KEY: tf.io.FixedLenFeature([], tf.int64),
            records.WIDTH_KEY: tf.io.FixedLenFeature([], tf.int64)}
    rows = []
    for raw in tf.data.TFRecordDataset(records.list_shards(str(out), split)):
        f = tf.io.parse_single_example(raw, spec)
        rows.append((int(f[records.LABEL_KEY]), f[records.SYNSET_KEY].numpy(), int(f[records.HEIGHT_KEY]),
                     int(f[records.WIDTH_KEY])))
    return sorted(rows)


def test_make_from_folder(tmp_path):
    made = data_tools.make_from_folder(str(photo_folder(tmp_path / "photos")), str(tmp_path / "out"),
                                       num_shards=2, validation_fraction=0.3)
    assert (made["classes"], made["train_records"] + made["validation_records"]) == (3, 9)
    assert len(made["train_shards"]) == 2 and len(made["validation_shards"]) == 1
    rows = stored(tmp_path / "out", "train") + stored(tmp_path / "out", "validation")
    # Classes in name order: ant=1, moth=2, zebra=3; sizes from the JPEG headers.
    assert sorted({(label, synset) for label, synset, _, _ in rows}) == [(1, b"ant"), (2, b"moth"), (3, b"zebra")]
    assert all(h >= 30 and w >= 40 for _, _, h, w in rows)
    # Every class of two or more images keeps at least one for validation.
    assert {label for label, *_ in stored(tmp_path / "out", "validation")} == {1, 3}


def test_make_is_deterministic_for_a_seed(tmp_path):
    folder = str(photo_folder(tmp_path / "photos"))
    runs = [data_tools.make_from_folder(folder, str(tmp_path / f"out{i}"), seed=4) for i in range(2)]
    assert [Path(p).read_bytes() for p in runs[0]["train_shards"]] == [Path(p).read_bytes() for p in runs[1]["train_shards"]]


def _not_a_jpeg(root: Path) -> Path:
    photo_folder(root)
    (root / "ant" / "notes.png").write_bytes(tf.io.encode_png(tf.zeros((4, 4, 3), tf.uint8)).numpy())
    return root


def _empty_class(root: Path) -> Path:
    photo_folder(root)
    (root / "empty").mkdir()
    return root


@pytest.mark.parametrize(
    "make, message",
    [
        pytest.param(lambda r: r / "absent", "no folder", id="missing_folder"),
        pytest.param(lambda r: (r.mkdir(), r)[1], "no class subfolders", id="no_classes"),
        pytest.param(_empty_class, "has no images", id="empty_class"),
        pytest.param(_not_a_jpeg, "notes.png is not a JPEG; convert it", id="png_file"),
    ],
)
def test_make_errors(tmp_path, make, message):
    with pytest.raises(UsageError, match=message):
        data_tools.make_from_folder(str(make(tmp_path / "photos")), str(tmp_path / "out"))


def test_make_into_an_unwritable_place(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="choose a writable --out"):
        data_tools.make_from_folder(str(photo_folder(tmp_path / "photos")), str(tmp_path / "file" / "out"))


def test_inspect(tmp_path):
    info = data_tools.inspect(str(write_imagenet_dir(tmp_path, num_classes=NUM_CLASSES)), sample=10,
                              num_classes=NUM_CLASSES)
    train, validation = info["splits"]["train"], info["splits"]["validation"]
    assert info["layout"] == "custom"
    assert (train["shards"], train["records"], validation["records"]) == (3, NUM_CLASSES * 24, NUM_CLASSES * 6)
    assert (train["label_min"], train["label_max"], train["labels_in_range"]) == (0, NUM_CLASSES - 1, True)
    assert train["sampled_records"] == 10 and train["formats"] == {"JPEG": 10}
    assert 20 <= train["height_px"]["min"] <= train["height_px"]["median"] <= train["height_px"]["max"] <= 120


def test_inspect_labels_out_of_range(tmp_path):
    info = data_tools.inspect(str(write_imagenet_dir(tmp_path, num_classes=NUM_CLASSES)), num_classes=3)
    assert info["splits"]["train"]["labels_in_range"] is False


def test_inspect_names_a_corrupt_shard(tmp_path):
    data_dir = write_imagenet_dir(tmp_path, num_classes=NUM_CLASSES)
    flip_byte(records.list_shards(str(data_dir), "validation")[1], 3000)
    with pytest.raises(UsageError, match="validation-00001-of-00002, record .*checksum mismatch"):
        data_tools.inspect(str(data_dir), num_classes=NUM_CLASSES)


def test_inspect_without_shards(tmp_path):
    with pytest.raises(UsageError, match="none named train-NNNNN-of-NNNNN|no train-NNNNN"):
        data_tools.inspect(str(tmp_path))

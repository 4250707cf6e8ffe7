"""bench/data/synthetic_set.py: a synthetic set's settings, and its marker (standard library only)."""
import json

import pytest

from bench.data.synthetic_set import MARKER_FILE, SyntheticSet, incomplete_set, synthetic_jpegs_marker, write_marker
from console import runs_without


@pytest.mark.parametrize("train, validation, shards, expected", [
    pytest.param(2000, 500, 16, 4, id="defaults"),
    pytest.param(1_281_167, 50_000, 1024, 40, id="imagenets_counts"),
    pytest.param(10, 1, 10, 1, id="offbyone_one_image_one_shard"),
    pytest.param(10, 0, 3, 0, id="no_validation"),
])
def test_validation_shards_hold_as_many_images_as_trainings(train, validation, shards, expected):
    assert SyntheticSet("/d", train, validation, shards).validation_shards == expected


@pytest.mark.parametrize("changes, message", [
    pytest.param(dict(train_images=0), "1 training image or more", id="no_training"),
    pytest.param(dict(validation_images=-1), "0 validation or more", id="negative_validation"),
    pytest.param(dict(train_shards=0), "training shards must be 1..2000", id="no_shards"),
    pytest.param(dict(train_images=3, train_shards=4), "must be 1..3", id="offbyone_empty_shard"),
])
def test_a_set_is_validated_on_creation(changes, message):
    with pytest.raises(ValueError, match=message):
        SyntheticSet(**{"out_dir": "/d", **changes})


def test_the_marker_round_trips(tmp_path):
    written = write_marker(SyntheticSet(str(tmp_path), 10, 2, 5, seed=9), seconds=1.5)
    assert synthetic_jpegs_marker(str(tmp_path)) == written
    assert written["seed"] == 9 and written["seconds"] == 1.5 and written["synthetic_jpegs"] is True
    assert not list(tmp_path.glob("*.tmp"))


def test_a_set_marked_incomplete_is_named_and_one_marked_complete_or_by_an_older_writer_is_not(tmp_path):
    spec = SyntheticSet(str(tmp_path), 10, 2, 5)
    assert write_marker(spec, complete=False)["complete"] is False
    assert incomplete_set(str(tmp_path)) == (
        f"{tmp_path} holds synthetic JPEGs whose writing stopped before it finished ({MARKER_FILE} says "
        "incomplete): remove the directory and make the set again with `podbench data make-synthetic-jpegs`")
    write_marker(spec, seconds=1.0)
    assert incomplete_set(str(tmp_path)) is None
    (tmp_path / MARKER_FILE).write_text(json.dumps({"synthetic_jpegs": True}))  # written last, as before
    assert incomplete_set(str(tmp_path)) is None and incomplete_set(str(tmp_path / "absent")) is None


def test_other_data_has_no_marker(tmp_path):
    assert synthetic_jpegs_marker(str(tmp_path)) is None
    assert synthetic_jpegs_marker(str(tmp_path / "absent")) is None
    assert synthetic_jpegs_marker(None) is None
    assert synthetic_jpegs_marker("gs://bucket/imagenet") is None


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_a_damaged_marker_still_marks_the_set(tmp_path, text):
    (tmp_path / MARKER_FILE).write_text(text)
    assert synthetic_jpegs_marker(str(tmp_path)) == {"synthetic_jpegs": True}


def test_reading_the_marker_loads_no_numpy(tmp_path):
    (tmp_path / MARKER_FILE).write_text(json.dumps({"synthetic_jpegs": True}))
    runs_without("from bench.data.synthetic_set import synthetic_jpegs_marker\n"
                 f"assert synthetic_jpegs_marker({str(tmp_path)!r})", module="numpy")

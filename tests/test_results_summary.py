"""bench/results/summary.py: the one summary.json schema, its writer and its reader."""
import dataclasses
import errno
import json
from pathlib import Path

import pytest

from bench.results import rundir
from bench.results import summary as schema
from bench.results.summary import Summary
from console import fill_filesystem


def full() -> Summary:
    return Summary(run_id="20261122T100000Z-abcdef", status="completed", platform="cpu", strategy="default",
                   num_replicas=2, global_batch_size=8, per_replica_batch_size=4, precision="float32", xla=False,
                   images_per_sec=12.5, measured_steps=8, measured_s=5.12, warmup_steps=4,
                   step_time_s={"median": 0.64, "p90": 0.7, "p99": 0.71}, eval_curve=[{"epoch": 1, "top_1": 0.5}],
                   restart_gaps_s=[3.5], mfu=0.1)


def test_round_trip_through_json_is_exact(tmp_path):
    written = full()
    schema.write_summary(tmp_path, written)
    assert schema.read_summary(tmp_path) == written
    assert json.loads((tmp_path / "summary.json").read_text()) == written.to_json()


def test_every_field_has_a_json_type():
    # Each annotation admits only what JSON can hold: a new field of another type would not round-trip.
    for name, allowed in schema._KNOWN.items():
        assert set(allowed) <= {int, float, str, bool, dict, list, type(None)}, name


@pytest.mark.parametrize("obj, message", [
    pytest.param([1, 2], "holds a list, not a run summary", id="not_an_object"),
    pytest.param({"status": "completed"}, "lacks run_id", id="no_run_id"),
    pytest.param({"run_id": "r"}, "lacks status", id="no_status"),
    pytest.param({"run_id": "r", "status": "done"}, "status 'done' is not one of", id="unknown_status"),
    pytest.param({"run_id": "r", "status": "completed", "num_replicas": "2"}, "malformed num_replicas", id="string"),
    pytest.param({"run_id": "r", "status": "completed", "num_replicas": True}, "malformed num_replicas",
                 id="bool_for_int"),
    pytest.param({"run_id": "r", "status": "completed", "xla": 1}, "malformed xla", id="int_for_bool"),
    pytest.param({"run_id": "r", "status": "completed", "images_per_sec": [1]}, "malformed images_per_sec",
                 id="list_for_float"),
    pytest.param({"run_id": "r", "status": "completed", "weight_update": "zero3"}, "weight_update 'zero3'",
                 id="unknown_weight_update"),
    pytest.param({"run_id": "r", "status": "completed", "update_time_s": -0.001}, "update_time_s must be",
                 id="negative_update_time"),
    pytest.param({"run_id": "r", "status": "completed", "optimizer_state_bytes_per_device": 1.5},
                 "malformed optimizer_state_bytes_per_device", id="fractional_state_bytes"),
])
def test_a_malformed_summary_is_named(obj, message):
    with pytest.raises(ValueError, match=message):
        schema.summary_from_json(obj, "RUN/summary.json")


def test_ints_are_floats_and_unknown_keys_are_ignored():
    s = schema.summary_from_json({"run_id": "r", "status": "completed", "images_per_sec": 3,
                                  "a_key_from_a_newer_podbench": {"x": 1}})
    assert s.images_per_sec == 3 and not hasattr(s, "a_key_from_a_newer_podbench")


def test_the_weight_update_fields_are_read_and_an_older_summary_lacks_them():
    """The JAX engine's weight update (issue 41): its mode, its measured update, its share and state; a summary
    written before it has none of them, and loads with each None."""
    s = schema.summary_from_json({"run_id": "r", "status": "completed", "weight_update": "sharded",
                                  "update_time_s": 0.0005, "update_share": 0.01,
                                  "optimizer_state_bytes_per_device": 25_557_032})
    assert (s.weight_update, s.update_time_s, s.update_share, s.optimizer_state_bytes_per_device) == \
        ("sharded", 0.0005, 0.01, 25_557_032)
    old = schema.summary_from_json({"run_id": "r", "status": "completed"})
    assert (old.weight_update, old.update_time_s, old.update_share, old.optimizer_state_bytes_per_device) == \
        (None, None, None, None)


def test_the_spatial_fields_are_read_and_an_older_summary_lacks_them():
    gathers = [{"layer": "stage5_block0/conv1", "pass": "backward", "shape": "f32[4,3,256,512]"}]
    s = schema.summary_from_json({"run_id": "r", "status": "completed", "spatial_partitions": 4, "num_devices": 8,
                                  "activation_bytes_per_device": 184_760, "halo_exchanges": 49,
                                  "spatial_gathers": gathers})
    assert (s.spatial_partitions, s.num_devices, s.activation_bytes_per_device, s.halo_exchanges,
            s.spatial_gathers) == (4, 8, 184_760, 49, gathers)
    old = schema.summary_from_json({"run_id": "r", "status": "completed"})
    assert (old.spatial_partitions, old.activation_bytes_per_device, old.spatial_gathers) == (None, None, None)
    with pytest.raises(ValueError, match="malformed spatial_partitions"):
        schema.summary_from_json({"run_id": "r", "status": "completed", "spatial_partitions": "4"})


def test_partitions_are_part_of_a_runs_configuration_and_an_older_run_was_unpartitioned():
    split = schema.Summary(run_id="r", status="completed", spatial_partitions=4)
    assert schema.configuration(split, {})["spatial_partitions"] == 4
    assert schema.configuration(schema.Summary(run_id="old", status="completed"), {})["spatial_partitions"] == 1


def test_missing_summary_says_how_to_rebuild_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="podbench summarize RUN_DIR"):
        schema.read_summary(tmp_path)


@pytest.mark.parametrize("text, message", [
    pytest.param('{"run_id": "r", "status": ', "is not valid JSON", id="torn"),
    pytest.param('{"run_id": "r", "status": "completed", "mfu": NaN}', "NaN is not a JSON number", id="bare_nan"),
])
def test_unreadable_summary_names_the_file(tmp_path, text, message):
    (tmp_path / "summary.json").write_text(text)
    with pytest.raises(ValueError, match=message):
        schema.read_summary(tmp_path)


@pytest.mark.parametrize("changes, measured", [
    pytest.param({}, True, id="a_rate"),
    pytest.param({"images_per_sec": None}, False, id="no_rate"),
    pytest.param({"images_per_sec": 0.0}, False, id="zero_rate"),
    pytest.param({"platform": None}, False, id="stopped_before_the_plan"),
])
def test_measured_means_a_steady_state_rate(changes, measured):
    assert dataclasses.replace(full(), **changes).measured is measured


def test_earlier_runs_are_siblings_of_one_configuration_that_started_before(tmp_path):
    from run_fixture import run_id_at, write_run
    from bench.results.summary import earlier_runs, read_summary

    first, second, other, later = (write_run(tmp_path, run_id_at(i), image_size=size)
                                   for i, size in enumerate((224, 224, 64, 224)))
    found = earlier_runs(later, read_summary(later))
    assert [s.run_id for s in found] == [run_id_at(0), run_id_at(1)]  # not the 64x64 run, not itself
    assert earlier_runs(first, read_summary(first)) == []


# --- a summary even on a full disk: the room reserved at the run's start ------------------------------------


def full_run_dir(tmpfs, reserve: bool) -> Path:
    """A run directory on a 1 MiB tmpfs filled to its last byte, with or without its reserved room."""
    run_dir = tmpfs(1) / "run"
    run_dir.mkdir()
    if reserve:
        assert schema.reserve_room(run_dir)
    fill_filesystem(run_dir.parent)
    with pytest.raises(OSError) as full:
        (run_dir.parent / "probe").write_bytes(b"x" * 8192)
    assert full.value.errno == errno.ENOSPC  # the filesystem really is full
    return run_dir


def test_a_full_filesystem_still_gets_its_summary_in_place_twice(tmpfs):
    run_dir = full_run_dir(tmpfs, reserve=True)
    child = Summary("r", "failed", error="the filesystem of the run directory is full")
    schema.write_summary(run_dir, child)  # the training process's
    assert schema.read_summary(run_dir) == child and not (run_dir / rundir.RESERVE_FILE).exists()
    supervisor = dataclasses.replace(child, error=child.error + "; free space, or give an --output on a larger disk")
    schema.write_summary(run_dir, supervisor)  # then its supervisor's, in the room the first one left
    assert schema.read_summary(run_dir) == supervisor
    assert sorted(p.name for p in run_dir.iterdir()) == [rundir.SUMMARY_FILE]  # no temporary file left


def test_without_its_room_a_full_filesystem_refuses_the_summary(tmpfs):
    run_dir = full_run_dir(tmpfs, reserve=False)
    with pytest.raises(OSError) as refused:
        schema.write_summary(run_dir, Summary("r", "failed"))
    assert refused.value.errno == errno.ENOSPC and list(run_dir.iterdir()) == []


def test_the_room_is_real_bytes_and_goes_back_at_the_end(tmp_path):
    assert schema.reserve_room(tmp_path)
    reserve = tmp_path / rundir.RESERVE_FILE
    assert reserve.stat().st_size == schema.RESERVE_BYTES and reserve.stat().st_blocks * 512 >= schema.RESERVE_BYTES
    assert len(set(reserve.read_bytes()[:4096])) > 64  # random, not zeros a filesystem could compress away
    schema.release_room(tmp_path)
    assert not reserve.exists()

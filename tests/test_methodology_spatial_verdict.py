"""methodology/spatial_verdict.py: whether a split pays, against data parallelism at the same or a larger batch or
on fewer devices; every verdict from hand-made times, then the alternatives a real model finds."""
import dataclasses

import pytest

from methodology import interconnect, projection, published, spatial_verdict as sv
from methodology.epochs import LARGEST_CONVERGED_BATCH
from methodology.projection import CurvePoint, DeviceCurve
from methodology.spatial_verdict import Alternative

CATALOGUE = interconnect.load_interconnects()


def _model(**changes) -> projection.Model:
    base = dict(curve=DeviceCurve((CurvePoint(32, 1000.0), CurvePoint(256, 2000.0))), fabric=CATALOGUE["tpu-v3"],
                network=None, per_device_batch=256, payload_bytes=102_228_128, global_batch_max=512,
                curve_has_sync=True, spatial_partitions=4, recipe="rcp")
    return projection.Model(**{**base, **changes})


def _row(blog_s: float | None = 100.0):
    """A split row whose step is 10 ms, 1 ms of it the split's own parts (10%), taking ``blog_s``."""
    row = projection.project_size(_model(), 1024)
    time = dataclasses.replace(row.time, blog_s=blog_s) if blog_s is not None else None
    return dataclasses.replace(row, step_s=0.010, halo_s=0.0004, partition_all_reduce_s=0.0006, time=time)


def test_data_parallel_devices():
    assert LARGEST_CONVERGED_BATCH == 67_840  # MLPerf's RCP table's largest point
    assert sv.data_parallel_devices() == 67_840 and sv.data_parallel_devices(2) == 33_920


def test_an_unsplit_row_says_a_split_would_not_pay():
    v = sv.unsplit(replicas=64, global_batch=16_384)
    assert v.verdict == sv.UNSPLIT and "would not pay here" in v.line and "past 67,840 devices" in v.line
    assert "past 33,920 devices" in sv.unsplit(8192, 65_536, replicas_per_device=2).line
    assert "cannot share 1,024 images among 2,048 replicas" in sv.unsplit(2048, 1024).line


@pytest.mark.parametrize(
    "alternatives, verdict, fragment",
    [
        # The split row: 100 s, its own parts 10% of its step: from 90 s (hidden) to 110 s (twice as long).
        pytest.param([(sv.LARGER, 111.0), (sv.FEWER, 120.0)], sv.PAYS, "4-way pays: 100.0 s against 111.0 s",
                     id="pays_even_if_its_parts_double"),
        pytest.param([(sv.SAME, 85.0)], sv.SAME, "does not pay, data parallelism does better", id="same_batch"),
        pytest.param([(sv.LARGER, 89.0), (sv.FEWER, 95.0)], sv.LARGER, "a larger batch does better",
                     id="larger_batch"),
        pytest.param([(sv.LARGER, 99.0), (sv.FEWER, 80.0)], sv.FEWER, "fewer devices do as well or better",
                     id="fewer_devices"),
        pytest.param([(sv.FEWER, 105.0)], sv.CLOSE, "pays as modelled, but not if its halo exchanges",
                     id="close_leaning_to_pays"),
        pytest.param([(sv.FEWER, 95.0)], sv.CLOSE, "does not pay as modelled, but would if most",
                     id="close_leaning_to_not"),
        pytest.param([(sv.FEWER, 110.0)], sv.CLOSE, "(10% of its step)", id="offbyone_exactly_twice"),
        pytest.param([(sv.FEWER, 90.0)], sv.CLOSE, "would if most", id="offbyone_exactly_hidden"),
    ],
)
def test_judge_by_hand(alternatives, verdict, fragment):
    found = tuple(Alternative(kind, 512, 1024, seconds, 35.0) for kind, seconds in alternatives)
    v = sv.judge(_row(), found)
    assert v.verdict == verdict and fragment in v.line
    assert v.to_json()["alternatives"][0]["what"] == sv._ALTERNATIVES[alternatives[0][0]]


def test_judge_the_only_way_and_no_time():
    why = "data parallelism alone would need a global batch of 131,072"
    only = sv.judge(_row(), (Alternative(sv.LARGER, 0, 0, None, why_not=why),))
    assert only.verdict == sv.ONLY_WAY and why in only.line
    assert sv.judge(_row(None), ()).verdict == sv.NO_TIME


def test_alternatives_a_real_model_finds():
    model = _model()  # 1,024 chips, 512 images: half an image a chip, 4-way
    row = projection.project_size(model, 1024)
    larger, fewer = sv.alternatives(model, row)
    assert (larger.kind, larger.devices, larger.global_batch) == (sv.LARGER, 1024, 1024)
    assert (fewer.kind, fewer.devices, fewer.global_batch) == (sv.FEWER, 512, 512)
    assert larger.blog_s and fewer.blog_s and larger.epochs == pytest.approx(35.0, abs=0.1)
    whole = projection.project_size(_model(global_batch_max=2048), 1024)  # two images a chip: data parallelism runs
    (same,) = sv.alternatives(_model(global_batch_max=2048), whole)
    assert (same.kind, same.global_batch) == (sv.SAME, 2048) and sv.verdict(_model(global_batch_max=2048),
                                                                           whole).verdict == sv.SAME


def test_past_the_largest_batch_only_fewer_devices_compare():
    # MLPerf v0.7's TPU v3 anchor on 65,536 chips (131,072 cores) at 65,536 images, split 2 ways.
    model = dataclasses.replace(
        projection.config_model(published.by_name("mlperf-v0.7-tpu-v3-32"), CATALOGUE["tpu-v3-multipod"],
                                network=CATALOGUE["tpu-v5p-dcn"], global_batch_max=65_536, recipe="rcp",
                                weight_update_sharding=True), spatial_partitions=2)
    row = projection.project_size(model, 65_536)
    larger, fewer = sv.alternatives(model, row)
    assert larger.blog_s is None and "131,072 on 65,536 devices, more than the largest" in larger.why_not
    assert (fewer.devices, fewer.global_batch) == (32_768, 65_536) and fewer.blog_s
    assert sv.verdict(model, row).verdict == sv.CLOSE  # PROJECTION.md: decided by what nothing has measured


def test_a_measured_split_run_said_as_it_ran():
    whole = sv.measured_split(replicas=4, partitions=2, global_batch=128)
    assert whole.verdict == sv.MEASURED and "16 images a device (128 over 8)" in whole.line
    assert "data parallelism on the same devices would run this batch without" in whole.line
    half = sv.measured_split(replicas=4, partitions=4, global_batch=8)
    assert "0.5 images a device (8 over 16), fewer images than devices" in half.line

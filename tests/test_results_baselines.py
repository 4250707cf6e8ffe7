"""bench/results/baselines.py: named baselines in a directory, and under gs:// on the real GCS JSON API
(gcp-storage-emulator on loopback, tests/gcs_emulator.py)."""
from __future__ import annotations

import json

import pytest

from bench.errors import UsageError
from bench.results import baselines, rundir
from gcs_emulator import gcs_emulator  # noqa: F401 (the fixture)
from run_fixture import run_id_at, write_run


@pytest.fixture
def three_runs(tmp_path):
    return [(run_id_at(i), write_run(tmp_path / "runs", run_id_at(i))) for i in range(3)]


@pytest.mark.parametrize("name, ok", [
    pytest.param("main", True, id="word"),
    pytest.param("v1.2_nightly-cpu", True, id="dots-dashes-underscores"),
    pytest.param("a" * 100, True, id="offbyone-100-characters"),
    pytest.param("a" * 101, False, id="offbyone-101-characters"),
    pytest.param("", False, id="empty"),
    pytest.param(".hidden", False, id="leading-dot"),
    pytest.param("..", False, id="parent"),
    pytest.param("a/b", False, id="slash"),
    pytest.param("main branch", False, id="space"),
])
def test_check_name(name, ok):
    if ok:
        assert baselines.check_name(name) == name
    else:
        with pytest.raises(UsageError, match="must be 1-100 letters"):
            baselines.check_name(name)


def test_save_and_load_in_a_directory(tmp_path, three_runs):
    where = tmp_path / "baselines"
    events = three_runs[0][1] / rundir.EVENTS_DIR
    events.mkdir()
    (events / "events.out.tfevents.1").write_bytes(b"\0" * 64)
    saved = baselines.save_baseline("main", three_runs[:2], str(where))
    assert saved == str(where / "main")
    manifest = json.loads((where / "main" / baselines.MANIFEST_FILE).read_text())
    assert manifest["name"] == "main" and manifest["runs"] == [three_runs[0][0], three_runs[1][0]]
    # The run's files, not its event files.
    copied = sorted(p.name for p in (where / "main" / three_runs[0][0]).iterdir())
    assert copied == sorted([rundir.CONFIG_FILE, rundir.ENVIRONMENT_FILE, rundir.STEPS_FILE, rundir.LIFECYCLE_FILE,
                             rundir.SUMMARY_FILE])
    assert baselines.load_baseline("main", str(where)) == [where / "main" / i for i, _ in three_runs[:2]]


def test_saving_again_replaces_the_baseline_whole(tmp_path, three_runs):
    where = tmp_path / "baselines"
    baselines.save_baseline("main", three_runs[:2], str(where))
    baselines.save_baseline("main", three_runs[2:], str(where))
    assert sorted(p.name for p in where.iterdir()) == ["main"]  # no staging or old copy left
    assert sorted(p.name for p in (where / "main").iterdir()) == sorted([baselines.MANIFEST_FILE, three_runs[2][0]])
    assert baselines.saved_baselines(where) == ["main"]


def test_save_refuses_a_run_twice_and_an_unwritable_place(tmp_path, three_runs):
    with pytest.raises(UsageError, match="names a run twice"):
        baselines.save_baseline("main", [three_runs[0], three_runs[0]], str(tmp_path / "b"))
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(UsageError, match=f"cannot save baseline main in {blocker} .*choose a writable --baselines"):
        baselines.save_baseline("main", three_runs[:1], str(blocker))


def test_load_names_what_is_wrong(tmp_path, three_runs):
    where = tmp_path / "baselines"
    baselines.save_baseline("main", three_runs[:2], str(where))
    with pytest.raises(UsageError, match=r"no baseline nightly in .* \(saved there: main\)"):
        baselines.load_baseline("nightly", str(where))
    (where / "main" / baselines.MANIFEST_FILE).write_text('{"runs": []}')
    with pytest.raises(UsageError, match="is not a podbench baseline"):
        baselines.load_baseline("main", str(where))
    (where / "main" / baselines.MANIFEST_FILE).write_text(json.dumps({"runs": ["20990101T000000Z-gone00"]}))
    with pytest.raises(UsageError, match="lacks run.* 20990101T000000Z-gone00"):
        baselines.load_baseline("main", str(where))


def test_save_and_load_on_gcs(tmp_path, three_runs, monkeypatch, gcs_emulator):  # noqa: F811 (the fixture)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    gcs_emulator.create_bucket("podbench-baselines")
    where = "gs://podbench-baselines/ci"
    assert baselines.save_baseline("main", three_runs[:2], where) == f"{where}/main/"
    objects = gcs_emulator.objects("podbench-baselines", "ci/main/")
    assert f"ci/main/{baselines.MANIFEST_FILE}" in objects
    assert f"ci/main/{three_runs[0][0]}/{rundir.STEPS_FILE}" in objects
    loaded = baselines.load_baseline("main", where)
    assert [p.name for p in loaded] == [three_runs[0][0], three_runs[1][0]]
    assert (loaded[0] / rundir.STEPS_FILE).read_bytes() == (three_runs[0][1] / rundir.STEPS_FILE).read_bytes()
    # Saving again: baseline.json now names only the new run; the older runs' objects are ignored.
    baselines.save_baseline("main", three_runs[2:], where)
    assert [p.name for p in baselines.load_baseline("main", where)] == [three_runs[2][0]]
    with pytest.raises(UsageError, match=f"no baseline nightly in {where}; save one with"):
        baselines.load_baseline("nightly", where)


def test_gcs_errors_are_one_line(tmp_path, three_runs, monkeypatch, gcs_emulator):  # noqa: F811 (the fixture)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator.url)
    with pytest.raises(UsageError, match="bucket no-such-bucket-here does not exist"):
        baselines.save_baseline("main", three_runs[:1], "gs://no-such-bucket-here/ci")
    with pytest.raises(UsageError, match="--baselines: 'Bad_Bucket' in 'gs://Bad_Bucket' is not a valid bucket name"):
        baselines.load_baseline("main", "gs://Bad_Bucket")


def test_the_spread_is_kept_and_read_back_and_an_older_baseline_has_none(tmp_path, three_runs):
    where = tmp_path / "baselines"
    baselines.save_baseline("main", three_runs, str(where), spread={"images_per_sec": [1.0, 2.0, 3.0],
                                                                    "run_noise_sd": 0.031})
    loaded = baselines.load_baseline("main", str(where))
    assert baselines.recorded_spread(loaded) == {"run_noise_sd": 0.031}
    manifest = where / "main" / baselines.MANIFEST_FILE
    manifest.write_text(json.dumps({"name": "main", "runs": [i for i, _ in three_runs], "saved_at": "x"}))
    assert baselines.recorded_spread(loaded) == {}


@pytest.mark.parametrize("place, message", [
    pytest.param("runs", "holds run directories", id="runs-directory"),
    pytest.param("runs/{run}/checkpoints", "inside the run or checkpoint directory", id="a-runs-checkpoints"),
    pytest.param("taken", "exists and is not a podbench baseline", id="name-taken-by-something-else"),
])
def test_check_local_home_refuses(tmp_path, three_runs, place, message):
    (tmp_path / "taken" / "main").mkdir(parents=True)
    with pytest.raises(UsageError, match=message):
        baselines.check_local_home(tmp_path / place.format(run=three_runs[0][0]), "main")
    baselines.check_local_home(tmp_path / "baselines", "main")  # a directory of its own: fine

"""bench/cli/run_flags.py: one table builds the parser, maps flags onto the config, and spells them back."""
import dataclasses
import json

import pytest

from bench import cli
from bench.plan import config as cfg
from bench.cli import run_flags
from bench.cli.sweep import SWEEP_OWNED
from bench.errors import UsageError

SWEEP_ARGS = ["--image-size", "32", "--num-classes", "10", "--batch-size", "4", "--no-xla",
              "--precision", "float32", "--seed", "7", "--peak-tflops", "1.5", "--no-augment",
              "--data", "imagenet", "--data-dir", "/tmp", "--skip-corrupt"]  # a directory that exists


def parse(*argv):
    return cli.build_parser().parse_args(list(argv))


def test_every_flag_targets_a_real_config_field():
    config = cfg.RunConfig()
    for flag in run_flags.RUN_FLAGS:
        if flag.target is None:
            continue
        part, field = flag.target.split(".")
        assert field in {f.name for f in dataclasses.fields(getattr(config, part))}, flag.name


def test_flags_land_on_their_fields():
    c = run_flags.config_from_args(parse("run", "--batch-size", "16", "--epochs", "5", "--image-size", "64",
                                         "--strategy", "mirrored", "--replicas", "2", "--no-xla",
                                         "--output", "o", "--mllog", "m.log", "--peak-tflops", "3"))
    assert (c.train.per_replica_batch_size, c.train.epochs, c.model.image_size) == (16, 5, 64)
    assert (c.runtime.strategy, c.runtime.replicas, c.train.xla) == ("mirrored", 2, False)
    assert (c.output.dir, c.output.mllog, c.measure.peak_tflops) == ("o", "m.log", 3.0)


def test_peer_timeout_lands_on_the_runtime():
    c = run_flags.config_from_args(parse("run", "--strategy", "multi_worker", "--peer-timeout", "90"))
    assert c.runtime.peer_timeout_s == 90.0


@pytest.mark.parametrize("given, seconds", [("600", 600.0), ("0", 0.0)])
def test_collective_timeout_lands_on_the_runtime(given, seconds):
    c = run_flags.config_from_args(parse("run", "--strategy", "multi_worker", "--collective-timeout", given))
    assert c.runtime.collective_timeout_s == seconds
    assert run_flags.config_from_args(parse("run", "--strategy", "multi_worker")).runtime.collective_timeout_s is None


def test_no_peak_skips_the_probe_and_spells_back():
    assert run_flags.config_from_args(parse("run")).measure.measure_peak is True
    args = parse("sweep", "--replicas", "1", "--no-peak")
    assert run_flags.run_argv(args, skip=SWEEP_OWNED) == ["--no-peak"]
    assert run_flags.config_from_args(parse("run", "--no-peak")).measure.measure_peak is False


def test_flags_override_a_preset_and_epochs_replace_its_steps():
    c = run_flags.config_from_args(parse("run", "--preset", "smoke", "--train-steps", "8"))
    assert (c.model.image_size, c.train.train_steps, c.train.epochs) == (32, 8, None)


def test_argv_round_trips_through_the_run_parser():
    args = parse("sweep", "--replicas", "1,2", "--output", "out", "--json", "--strategy", "mirrored", *SWEEP_ARGS)
    flags = run_flags.run_argv(args, skip=SWEEP_OWNED)
    assert not set(flags) & {"--replicas", "--output", "--json", "--strategy"}  # the sweep sets those
    assert run_flags.config_from_args(parse("run", *flags)) == run_flags.config_from_args(parse("run", *SWEEP_ARGS))


def test_argv_of_nothing_given_is_empty():
    assert run_flags.run_argv(parse("sweep", "--replicas", "1"), skip=SWEEP_OWNED) == []


def test_config_json_re_runs_the_same_config_into_a_new_directory(tmp_path):
    original = run_flags.config_from_args(parse("run", "--preset", "smoke", "--seed", "3", "--output", "old",
                                                "--peak-tflops", "2"))
    (tmp_path / "config.json").write_text(json.dumps({"run_id": "r", "requested": dataclasses.asdict(original),
                                                      "resolved": {}}))
    again = run_flags.config_from_args(parse("run", "--config", str(tmp_path)))
    assert again == dataclasses.replace(original, output=cfg.OutputConfig())  # all but the directory
    changed = run_flags.config_from_args(parse("run", "--config", str(tmp_path / "config.json"), "--seed", "4"))
    assert changed.train.seed == 4


@pytest.mark.parametrize("argv, message", [
    pytest.param(["--config", "{tmp}/missing.json"], "no config file", id="missing"),
    pytest.param(["--config", "{tmp}/bad.json"], "not a podbench config.json", id="not_a_config"),
    pytest.param(["--config", "{tmp}/bad.json", "--preset", "smoke"], "drop --preset", id="with_a_preset"),
    pytest.param(["--max-epochs", "3"], "--max-epochs caps a run with --target-accuracy", id="max_epochs_alone"),
])
def test_bad_flags_are_usage_errors(tmp_path, argv, message):
    (tmp_path / "bad.json").write_text('{"requested": {"train": {"seed": "x"}}}')
    with pytest.raises(UsageError, match=message):
        run_flags.config_from_args(parse("run", *[a.replace("{tmp}", str(tmp_path)) for a in argv]))

"""bench/plan/ready.py: what a merged config is checked for before any platform is known."""
import dataclasses

import pytest

from bench.plan import config as cfg
from bench.plan import presets, ready


def test_tpu_strategy_needs_an_address_once_flags_are_merged():
    config = presets.from_preset("tpu-v2-8")  # a preset may pick the strategy ...
    with pytest.raises(ValueError, match="needs --tpu"):
        ready.check_ready(config)  # ... but only the user can name the TPU
    named = dataclasses.replace(config, runtime=cfg.RuntimeConfig(strategy="tpu", tpu="local"))
    assert ready.check_ready(named) is named


@pytest.mark.parametrize(
    "train, data, message",
    [
        pytest.param(dict(epochs=1), {}, "warm-up \\(1 epoch\\) must be shorter than the run \\(1 epoch\\)",
                     id="one_epoch_is_all_warmup"),
        pytest.param(dict(train_steps=4, warmup_steps=4), {}, "\\(4 steps\\)", id="warmup_equals_steps"),
        pytest.param(dict(epochs=2, warmup_steps=6), dict(steps_per_epoch=3), "\\(6 steps\\)",
                     id="warmup_exceeds_epochs_times_steps"),
        pytest.param(dict(train_steps=5), dict(steps_per_epoch=5), "\\(5 steps\\)", id="default_warmup_epoch"),
    ],
)
def test_length_checks_that_need_no_platform(train, data, message):
    config = cfg.RunConfig(data=cfg.DataConfig(**data), train=cfg.TrainConfig(**train))
    with pytest.raises(ValueError, match=message):
        ready.check_ready(config)


@pytest.mark.parametrize(
    "train, data",
    [
        pytest.param(dict(epochs=2), {}, id="two_epochs"),
        pytest.param(dict(train_steps=5), {}, id="steps_per_epoch_unknown_until_platform"),
        pytest.param(dict(train_steps=6), dict(steps_per_epoch=5), id="offbyone_one_measured_step"),
    ],
)
def test_length_checks_pass_what_may_run(train, data):
    config = cfg.RunConfig(data=cfg.DataConfig(**data), train=cfg.TrainConfig(**train))
    assert ready.check_ready(config) is config


@pytest.mark.parametrize("xla, refused", [
    pytest.param(True, True, id="xla_refused"),
    pytest.param(None, False, id="default_runs_without"),
    pytest.param(False, False, id="no_xla"),
])
def test_multi_worker_with_xla_is_refused_before_tensorflow(xla, refused):
    config = cfg.RunConfig(train=cfg.TrainConfig(xla=xla), runtime=cfg.RuntimeConfig(strategy="multi_worker"))
    if refused:
        with pytest.raises(ValueError, match="cannot all-reduce across processes"):
            ready.check_ready(config)
    else:
        assert ready.check_ready(config) is config


def test_evaluating_synthetic_data_is_refused():
    config = dataclasses.replace(cfg.RunConfig(), train=cfg.TrainConfig(target_accuracy=0.76))
    with pytest.raises(ValueError, match="validation split"):
        ready.check_ready(config)

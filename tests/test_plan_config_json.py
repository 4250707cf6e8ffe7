"""bench/plan/config_json.py: config.json back to a config, every value checked."""
import dataclasses

import pytest

from bench.plan import config as cfg
from bench.plan import presets
from bench.plan.config_json import config_from_dict


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_config_json_round_trip_gives_the_same_config(name):
    config = cfg.replace(presets.from_preset(name), output=dict(mllog="m.log"), measure=dict(peak_tflops=1.5))
    assert config_from_dict(dataclasses.asdict(config)) == config


@pytest.mark.parametrize("requested, message", [
    pytest.param([], "not an object", id="not_an_object"),
    pytest.param(dict(model=dict(depth="50")), "model.depth = '50'", id="string_for_int"),
    pytest.param(dict(train=dict(xla=1)), "train.xla = 1", id="int_for_bool"),
    pytest.param(dict(train=dict(epochs=True)), "train.epochs = True", id="bool_for_int"),
    pytest.param(dict(train=dict(bogus=1)), "unknown train setting 'bogus'", id="unknown_field"),
    pytest.param(dict(extra=dict()), "unknown config part", id="unknown_part"),
    pytest.param(dict(model=dict(image_size=8)), "image size must be >= 32", id="refused_value"),
])
def test_config_from_dict_checks_every_value(requested, message):
    with pytest.raises(ValueError, match=message):
        config_from_dict(requested)

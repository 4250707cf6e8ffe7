"""methodology/constants.py: the conventions the arithmetic depends on, and their sources."""
import pytest

from methodology import constants


@pytest.mark.parametrize(
    "name, value",
    [
        pytest.param("IMAGENET_TRAIN_EXAMPLES", 1_281_167, id="imagenet_train"),
        pytest.param("IMAGENET_VALIDATION_EXAMPLES", 50_000, id="imagenet_validation"),
        pytest.param("WARMUP_EPOCHS", 1, id="one_warmup_epoch"),
        pytest.param("MEASURED_EPOCHS", 90, id="ninety_measured"),
        pytest.param("TOTAL_EPOCHS", 91, id="offbyone_91_run_in_all"),
        pytest.param("TARGET_TOP1_BLOG", 0.76, id="blog_target"),
        pytest.param("TARGET_TOP1_MLPERF", 0.759, id="mlperf_target"),
        pytest.param("TARGET_TOP1_MLPERF_V05", 0.749, id="mlperf_v05_target"),
        pytest.param("BLOG_RUNS_PER_CONFIG", 5, id="blog_five_runs"),
        pytest.param("MLPERF_MIN_RUNS", 5, id="mlperf_min_runs"),
    ],
)
def test_constant(name, value):
    assert getattr(constants, name) == value


def test_ninety_epochs_of_images():
    # facts.md: 90 epochs = 115,305,030 images.
    assert constants.MEASURED_EPOCHS * constants.IMAGENET_TRAIN_EXAMPLES == 115_305_030


def test_every_target_choice_has_a_source():
    assert constants.TARGETS == {"0.76": 0.76, "0.759": 0.759}
    assert set(constants.TARGET_SOURCES) == set(constants.TARGETS)
    assert "methodology page" in constants.TARGET_SOURCES["0.76"]
    assert "training_rules.adoc" in constants.TARGET_SOURCES["0.759"]
    assert "ResNet-50_v1.5_Performance_Comparison" in constants.EPOCHS_SOURCE


def test_targets_are_ordered_oldest_lowest():
    assert constants.TARGET_TOP1_MLPERF_V05 < constants.TARGET_TOP1_MLPERF < constants.TARGET_TOP1_BLOG

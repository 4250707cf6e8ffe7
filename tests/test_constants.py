"""methodology/constants.py: the conventions the arithmetic depends on."""
from methodology import constants


def test_epochs_are_one_warmup_plus_ninety():
    assert (constants.WARMUP_EPOCHS, constants.MEASURED_EPOCHS, constants.TOTAL_EPOCHS) == (1, 90, 91)


def test_targets():
    assert constants.TARGETS == {"0.76": 0.76, "0.759": 0.759}
    assert constants.TARGET_TOP1_MLPERF_V05 < constants.TARGET_TOP1_MLPERF < constants.TARGET_TOP1_BLOG


def test_imagenet_sizes():
    assert (constants.IMAGENET_TRAIN_EXAMPLES, constants.IMAGENET_VALIDATION_EXAMPLES) == (1_281_167, 50_000)

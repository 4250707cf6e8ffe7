"""bench/harness/execute.py: the plan an engine's ``prepare`` makes once its devices are known (``plan_run``), the
same for the JAX and torch engines. The flow itself (``execute``) runs in every engine's run tests."""
import pytest

from bench.data.spec import DataCounts
from bench.errors import UsageError
from bench.harness.execute import plan_run
from bench.plan import config as cfg


def _counts(asked: list, train_examples: int = 64):
    def count_examples(source, data_dir, num_classes, splits):
        asked.append((source, data_dir, num_classes, splits))
        return DataCounts(train_examples, 16 if "validation" in splits else None)
    return count_examples


REAL = cfg.DataConfig(source="imagenet", data_dir="d")


@pytest.mark.parametrize("evaluates, splits", [pytest.param(False, ("train",), id="training_only"),
                                               pytest.param(True, ("train", "validation"), id="with_evaluation")])
def test_the_engines_count_is_asked_for_the_splits_the_run_reads(evaluates, splits):
    asked = []
    train = cfg.TrainConfig(eval_every_epochs=1) if evaluates else cfg.TrainConfig()
    counts, plan = plan_run(cfg.RunConfig(data=REAL, train=train), _counts(asked), "cpu", 1, "one_device", 1, None)
    assert asked == [("imagenet", "d", cfg.RunConfig().model.num_classes, splits)]
    assert counts.train_examples == 64 and plan.platform == "cpu"


def test_a_plan_that_cannot_be_made_is_one_usage_line():
    with pytest.raises(UsageError, match="7 records, fewer than one global batch"):
        plan_run(cfg.RunConfig(data=REAL), _counts([], train_examples=7), "cpu", 1, "one_device", 1, None)

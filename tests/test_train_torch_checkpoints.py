"""bench/train_torch/checkpoints.py: one torch.save file a checkpoint, read back whole into the run's model and
optimizer (the update counts the schedule reads included), or named and passed over when it is not the model's.
(The directory's claim, rotation and input positions are the harness's: tests/test_harness_checkpoints.py; a
resume through the console script: tests/test_train_torch_resume.py.)"""
import pytest

torch = pytest.importorskip("torch")

from bench.errors import UsageError  # noqa: E402
from bench.train_torch import recipe  # noqa: E402
from bench.train_torch.build import TrainState  # noqa: E402
from bench.train_torch.checkpoints import Checkpointer  # noqa: E402
from bench.train_torch.devices import ONE_DEVICE, DeviceInfo  # noqa: E402
from methodology import schedule  # noqa: E402
from models import resnet_torch  # noqa: E402

CPU = DeviceInfo(ONE_DEVICE, "cpu", torch.device("cpu"))


def state_of(depth: int = 10, seed: int = 0, steps: int = 0) -> TrainState:
    """A ResNet at 32x32, 10 classes, its optimizer's state made, after ``steps`` steps on a fixed batch."""
    torch.manual_seed(seed)
    model = resnet_torch.build_resnet(depth, 10)
    decayed = resnet_torch.decayed_mask(model)
    optimizer = recipe.make_optimizer(model.named_parameters(), decayed, schedule.reference_schedule("momentum", 4, 2),
                                      2, 1e-4)
    optimizer.init_state()
    step = recipe.make_train_step(model, optimizer, decayed, 0.0, 1e-4)
    generator = torch.Generator().manual_seed(1)
    images, labels = torch.randn(4, 3, 32, 32, generator=generator), torch.randint(0, 10, (4,), generator=generator)
    for _ in range(steps):
        step(images, labels)
    return TrainState(model, optimizer)


def test_a_checkpoint_restores_the_weights_statistics_and_update_counts(tmp_path):
    trained = state_of(steps=3)
    saver = Checkpointer(str(tmp_path), CPU, "run-a", trained)
    path = saver.save(3)
    fresh = state_of(seed=1)
    step, found, damaged = Checkpointer(str(tmp_path), CPU, "run-a", fresh).restore_intact()
    assert (step, found, damaged) == (3, path, [])
    assert fresh.optimizer.update_count() == trained.optimizer.update_count() == 3
    for got, want in zip(fresh.tensors(), trained.tensors(), strict=True):
        assert torch.equal(got, want)


def test_a_checkpoint_of_another_model_is_named_and_an_older_one_restored(tmp_path):
    Checkpointer(str(tmp_path), CPU, "run-a", state_of(steps=1)).save(1)
    other = Checkpointer(str(tmp_path), CPU, "run-a", state_of(depth=18))
    other.save(2)  # a ResNet-18's state where the run is a ResNet-10
    fresh = state_of(seed=1)
    step, found, damaged = Checkpointer(str(tmp_path), CPU, "run-a", fresh).restore_intact()
    assert step == 1 and found.endswith("ckpt-1") and fresh.optimizer.update_count() == 1
    assert [path.rsplit("/", 1)[1] for path, _ in damaged] == ["ckpt-2"]
    assert "ValueError" in damaged[0][1]


def test_no_checkpoint_that_restores_is_one_line(tmp_path):
    Checkpointer(str(tmp_path), CPU, "run-a", state_of(depth=18)).save(2)
    (tmp_path / "ckpt-3").write_bytes(b"not a checkpoint")
    with pytest.raises(UsageError, match=r"no checkpoint in .* restores \(2 tried; the newest, .*ckpt-3"):
        Checkpointer(str(tmp_path), CPU, "run-a", state_of()).restore_intact()

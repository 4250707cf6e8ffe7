"""bench/train_torch/gpu_decode.py (--gpu-decode) and the encoded input it reads (bench/data/grain_records.py,
grain_input.py), as far as a CPU allows: no CUDA and no torchvision here (methodology/TORCH.md).

The device's half is decode + crop + flip + resize; the host's is which window of which record, flipped or not.
Both are checked against the CPU path on real shards of real JPEGs: grain's encoded batches, decoded here with
libjpeg-turbo at full scale (nvJPEG's stand-in) and cropped by the torch code the GPU runs, give the decoding
path's very images (its JPEGs are small enough that it decodes them at full scale too). The refusals where no
GPU or no torchvision is found go through the console script, as a user meets them.
"""
import numpy as np
import pytest
import simplejpeg
import torch

from bench.data import jpeg
from bench.data.grain_input import EncodedImages, GrainInput, count_examples
from bench.data.spec import InputSpec
from bench.errors import UsageError
from bench.train_torch import data, gpu_decode
from bench.train_torch.devices import DeviceInfo
from console import error_lines, podbench
from imagenet_fixture import write_imagenet_dir

NUM_CLASSES = 5
# Above every fixture image's side (120 at most): the CPU path decodes each at full scale (no DCT scaling).
SIZE = 128


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return str(write_imagenet_dir(tmp_path_factory.mktemp("imagenet"), num_classes=NUM_CLASSES, train_per_class=4,
                                  validation_per_class=1))


def batches(data_dir, encoded: bool, n: int = 3):
    spec = InputSpec("imagenet", SIZE, NUM_CLASSES, 4, data_dir=data_dir, image_dtype="uint8", seed=7)
    counts = count_examples("imagenet", data_dir, NUM_CLASSES, ("train",))
    with GrainInput(spec, counts, worker_count=0, encoded=encoded) as source:
        stream = source.batches()
        return [next(stream) for _ in range(n)]


def full_decode(jpegs: list[torch.Tensor]) -> list[torch.Tensor]:
    """nvJPEG's stand-in: each JPEG decoded whole by libjpeg-turbo, as [3, H, W] uint8."""
    return [torch.from_numpy(simplejpeg.decode_jpeg(j.numpy().tobytes(), **jpeg.DECODE)).permute(2, 0, 1)
            for j in jpegs]


def test_the_devices_crop_and_resize_are_the_cpu_paths():
    """crop_resize (torch, the GPU's) against jpeg.resize_window (numpy, the CPU's) on windows jpeg.sample_window
    draws, shrinking and enlarging, flipped and not: the same bytes within one rounding step."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (75, 110, 3), dtype=np.uint8)
    for size in (32, 96):
        for _ in range(8):
            window, flip = jpeg.train_crop(75, 110, size, rng)
            cpu = jpeg.resize_window(image, window, size)
            cpu = cpu[:, ::-1] if flip else cpu
            gpu = gpu_decode.crop_resize(torch.from_numpy(image).permute(2, 0, 1), window, flip, size)
            difference = np.abs(gpu.permute(1, 2, 0).numpy().astype(int) - cpu.astype(int))
            assert difference.max() <= 1, (window, flip)


def test_encoded_batches_decode_to_the_decoding_paths_images(data_dir):
    """Grain's encoded batches (the same records, crops and flips as the decoding path's: the crop is drawn from
    the same random numbers) decoded and cropped by decode_batch give the decoded batches (with workers, grain
    batches them the same way in each worker: pack_encoded is the batch's function there too)."""
    decoded, encoded = batches(data_dir, False), batches(data_dir, True)
    for (images, labels), (packed, packed_labels) in zip(decoded, encoded):
        assert isinstance(packed, EncodedImages) and packed.offsets[-1] == len(packed.jpeg)
        assert np.array_equal(labels, packed_labels)
        on_device = gpu_decode.decode_batch(packed, SIZE, torch.device("cpu"), decode=full_decode)
        assert on_device.shape == (4, 3, SIZE, SIZE) and on_device.dtype == torch.uint8
        difference = np.abs(on_device.permute(0, 2, 3, 1).numpy().astype(int) - images.astype(int))
        assert difference.max() <= 1
    assert any(p.flip.any() for p, _ in encoded) and any((~p.flip).any() for p, _ in encoded)


def test_the_engines_input_decodes_on_its_device_and_its_bench_waits_for_it(data_dir, monkeypatch):
    """The engine's own --gpu-decode input (bench/train_torch/data.py: grain's encoded batches, placed by decoding
    them on the run's device; the input bench timing that decode) with torchvision's decoder stood in for by
    libjpeg-turbo on this CPU: the decoding path's images, NCHW in channels_last, and the bench's records."""
    class Mode:
        RGB = "RGB"

    def decode(jpegs, mode, device):
        assert mode == "RGB" and device == torch.device("cpu")
        return full_decode(jpegs)

    monkeypatch.setattr(gpu_decode, "decode_jpeg", lambda: (decode, Mode))
    spec = InputSpec("imagenet", SIZE, NUM_CLASSES, 4, data_dir=data_dir, image_dtype="uint8", seed=7)
    counts = count_examples("imagenet", data_dir, NUM_CLASSES, ("train",))
    cpu = DeviceInfo("one_device", "cpu", torch.device("cpu"))
    source = data.real_input(spec, counts, cpu, channels_last=True, worker_count=0, gpu_decode=True)
    try:
        images, labels = next(source.batches)
    finally:
        source.close()
    (expected, expected_labels), *_ = batches(data_dir, False, n=1)
    assert images.shape == (4, 3, SIZE, SIZE) and images.is_contiguous(memory_format=torch.channels_last)
    assert np.array_equal(labels.numpy(), expected_labels) and labels.dtype == torch.int64
    assert np.abs(images.permute(0, 2, 3, 1).numpy().astype(int) - expected.astype(int)).max() <= 1
    records = data.time_input(spec, counts, 2, worker_count=0, decoded_on=cpu)
    assert [r.step for r in records] == [0, 1, 2]


def test_without_torchvision_the_decoder_is_refused_in_one_line():
    try:
        import torchvision.io  # noqa: F401
    except Exception:  # noqa: BLE001 (here: "operator torchvision::nms does not exist")
        pass
    else:
        pytest.skip("torchvision loads here: its decoder is there")
    with pytest.raises(UsageError) as refused:
        gpu_decode.decode_jpeg()
    message = str(refused.value)
    assert message.startswith("--gpu-decode needs torchvision's decode_jpeg, which does not load here (")
    assert "pip install -e '.[torch]'" in message and "\n" not in message


def test_a_run_without_a_gpu_refuses_gpu_decoding_in_one_line_and_leaves_nothing(data_dir, tmp_path):
    done = podbench("run", "--framework", "torch", "--data", "imagenet", "--data-dir", data_dir, "--gpu-decode",
                    "--image-size", "32", "--depth", "10", "--batch-size", "2", "--train-steps", "2",
                    "--warmup-steps", "1", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    runs = tmp_path / "results" / "runs"
    assert not runs.exists() or not any(runs.iterdir())
    assert error_lines(done.stderr) == ["error: --gpu-decode decodes the JPEGs on an NVIDIA GPU (nvJPEG), and torch sees none here "
                     "(cpu): drop --gpu-decode (grain's workers decode on the CPU)"], done.stderr

"""Hardware names as users and clouds write them, parsed once for every command. Pure.

One parser, so that ``cost``, ``project``, ``choose`` and ``report`` read a
name the same way:

- TPU slices by their Cloud accelerator type: ``v2-8`` ... ``v2-512``,
  ``v3-32``, ``v4-32``, ``v5p-128`` (these count TensorCores, two a chip:
  v4-32 is 16 chips), ``v5e-16`` or ``v5litepod-16`` and ``v6e-8`` (these count
  chips); a ``tpu-`` prefix is allowed (``tpu-v4-32``). How many TensorCores a
  chip has comes from tpu_peaks.csv (methodology/peaks.py), the one table of
  TPU generations.
- GPU configurations: ``a100x8``, ``h100x8``, ``v100x8``, ``a100-80gbx8``
  (or ``8xa100``), and the Compute Engine VMs that carry them:
  ``a2-highgpu-8g`` (8 x A100 40GB), ``a2-ultragpu-8g`` (8 x A100 80GB),
  ``a3-highgpu-8g`` (8 x H100).
- a bare device (``a100``, ``tpu-v5e``) with a count given apart (``--count``).

A run is named from what it recorded (platform, device kind, replicas):
``from_run``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from methodology import peaks

# GPU catalogue names -> (how a person names it, the Compute Engine VM family that carries N of
# them; {n}: the GPU count). Which fabric joins them: interconnect.fabric_for.
GPUS = {
    "v100": ("V100", None),  # 2018: n1-standard-{8n} with V100s attached (prices.py)
    "a100": ("A100 40GB", "a2-highgpu-{n}g"),
    "a100-80gb": ("A100 80GB", "a2-ultragpu-{n}g"),
    "h100": ("H100 80GB", "a3-highgpu-{n}g"),
}
# What a GPU's device kind (nvidia-smi's name) contains -> catalogue name; most specific first.
_GPU_KINDS = (("a100-sxm4-80gb", "a100-80gb"), ("a100 80gb", "a100-80gb"), ("a100-80gb", "a100-80gb"),
              ("a100", "a100"), ("h100", "h100"), ("v100", "v100"))
_TPU_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e"}  # Cloud's type names for v5e
GPUS_PER_VM = 8  # the largest GPU VMs the catalogue prices (n1-standard-64, a2-highgpu-8g ...)

FORMS = ("TPU slices v4-32, v5e-16, v5p-128, v2-512 (tpu-v4-32, v5litepod-16 too); "
         "GPUs a100x8, h100x8, v100x8, a100-80gbx8; VMs a2-highgpu-8g, a2-ultragpu-8g, a3-highgpu-8g")


@dataclass(frozen=True)
class Hardware:
    """A configuration of accelerators: which device, how many.

    Attributes:
      name: the canonical name: the slice (v4-32, v5e-16) or GPUs (a100x8).
      device: the price and interconnect catalogues' device: tpu-v4, tpu-v5e, a100, h100 ...
      devices: chips (TPU) or GPUs.
      platform: "tpu" or "gpu".
      slice_name: a TPU slice's accelerator type (v4-32), "" for GPUs.
      vm: the Compute Engine VM of one host's GPUs (a2-highgpu-8g), "" when none applies.
    """

    name: str
    device: str
    devices: int
    platform: str
    slice_name: str = ""
    vm: str = ""

    def __post_init__(self):
        if self.platform not in ("tpu", "gpu"):
            raise ValueError(f"platform must be tpu or gpu, got {self.platform!r}")
        if isinstance(self.devices, bool) or not isinstance(self.devices, int) or self.devices < 1:
            raise ValueError(f"devices must be a positive integer, got {self.devices!r}")

    @property
    def unit(self) -> str:
        return "chip" if self.platform == "tpu" else "GPU"

    @property
    def label(self) -> str:
        """"v4-32 (16 TPU v4 chips)", "a100x8 (8 x A100 40GB, a2-highgpu-8g)"."""
        if self.platform == "tpu":
            return f"{self.name} ({self.devices} TPU {self.device[4:]} chip{'s' * (self.devices > 1)})"
        vm = f", {self.vm}" if self.vm else ""
        return f"{self.name} ({self.devices} x {GPUS[self.device][0]}{vm})"


def tpu(generation: str, chips: int) -> Hardware:
    """``chips`` chips of TPU ``generation`` (v4, v5e ...), named as Cloud names the slice.

    Raises:
      ValueError: a generation tpu_peaks.csv does not know.
    """
    gen = next((g for g in peaks.load_tpu_generations() if g.generation == generation), None)
    if gen is None or gen.tensorcores_per_chip is None:
        known = ", ".join(g.generation for g in peaks.load_tpu_generations())
        raise ValueError(f"unknown TPU generation {generation!r}; known: {known}")
    slice_name = f"{generation}-{chips * gen.tensorcores_per_chip}"
    return Hardware(slice_name, f"tpu-{generation}", chips, "tpu", slice_name)


def gpus(device: str, count: int) -> Hardware:
    """``count`` GPUs of ``device`` (a100, h100 ...), with the VM that carries them when one host does.

    Raises:
      ValueError: a GPU the catalogue does not know.
    """
    if device not in GPUS:
        raise ValueError(f"unknown GPU {device!r}; known: {', '.join(GPUS)}")
    family = GPUS[device][1]
    vm = family.format(n=count) if family and count <= GPUS_PER_VM else ""
    return Hardware(f"{device}x{count}", device, count, "gpu", vm=vm)


def _parse_tpu(text: str) -> Hardware | None:
    found = re.fullmatch(r"(?:tpu-?)?(v\d+[a-z]*)-(\d+)", text)
    if not found:
        return None
    generation, number = _TPU_ALIASES.get(found.group(1), found.group(1)), int(found.group(2))
    matched = peaks.match_tpu(f"{generation}-{number}")
    if matched is None or matched[0].tensorcores_per_chip is None:
        raise ValueError(f"unknown TPU generation in {text!r}; {FORMS}")
    cores = matched[0].tensorcores_per_chip
    if number < cores or number % cores:
        raise ValueError(f"{text!r}: a {generation} slice counts TensorCores, {cores} a chip, so its number "
                         f"is a multiple of {cores}")
    return tpu(generation, number // cores)


def _parse_gpu(text: str) -> Hardware | None:
    for device, (_, family) in GPUS.items():
        if family and (found := re.fullmatch(family.replace("{n}", r"(\d+)"), text)):
            return gpus(device, int(found.group(1)))
    found = (re.fullmatch(r"([a-z0-9-]+?)x(\d+)", text) or re.fullmatch(r"(\d+)x([a-z0-9-]+)", text))
    if found:
        device, count = found.groups() if not found.group(1).isdigit() else found.groups()[::-1]
        if device in GPUS and int(count) >= 1:
            return gpus(device, int(count))
    return None


def parse(name: str, count: int | None = None) -> Hardware:
    """The configuration ``name`` stands for.

    Args:
      name: a slice (v4-32, tpu-v4-32, v5litepod-16), GPUs (a100x8), a GPU VM
        (a2-highgpu-8g), or a bare device (a100, tpu-v5e) with ``count``.
      count: devices of a bare device; with a name that carries its size it must agree.

    Returns:
      A Hardware.

    Raises:
      ValueError: a name none of the forms reads, or a count that contradicts the name.
    """
    text = str(name).strip().lower()
    bare = text in GPUS or re.fullmatch(r"tpu-v\d+[a-z]*", text)
    if bare:
        n = 1 if count is None else count
        if text in GPUS:
            return gpus(text, n)
        return tpu(_TPU_ALIASES.get(text[4:], text[4:]), n)
    hw = _parse_tpu(text) or _parse_gpu(text)
    if hw is None:
        raise ValueError(f"cannot read hardware name {name!r}; {FORMS}")
    if count is not None and count != 1 and count != hw.devices:
        raise ValueError(f"{name} is {hw.devices} {hw.unit}s, but the count given is {count}: drop the count")
    return hw


def is_name(name: str) -> bool:
    """Whether ``parse`` reads ``name`` (a configuration), without raising."""
    try:
        parse(name)
    except ValueError:
        return False
    return True


def gpu_device(device_kind: str | None) -> str | None:
    """The catalogue name of a GPU's device kind ("NVIDIA A100-SXM4-40GB" -> a100), or None."""
    kind = str(device_kind or "").lower()
    return next((name for key, name in _GPU_KINDS if key in kind), None)


def from_run(platform: str | None, device_kind: str | None, replicas: int | None,
             tpu_type: str | None = None) -> Hardware | None:
    """The hardware a run recorded it ran on, or None (a CPU, or nothing recognisable).

    Args:
      platform: cpu, gpu or tpu (summary.json).
      device_kind: summary.json's device_kind: "NVIDIA A100-SXM4-40GB", "TPU v4 (v4-32, 32 cores)".
      replicas: the run's replicas (GPUs; a TPU's TensorCores).
      tpu_type: environment.json's tpu_accelerator_type, when the run recorded one.

    Returns:
      A Hardware: GPUs x replicas, or the TPU slice the run names; None otherwise.
    """
    if platform == "gpu":
        device = gpu_device(device_kind)
        return gpus(device, int(replicas or 1)) if device else None
    if platform != "tpu":
        return None
    # device_kind carries the accelerator type: "TPU v4 (v4-32, 32 cores)" (bench/train/environment.py).
    found = re.search(r"\((v[0-9a-z]+-\d+)", str(device_kind or ""))
    for text in (tpu_type, found.group(1) if found else None):
        if text:
            try:
                return parse(text)
            except ValueError:
                continue
    return None

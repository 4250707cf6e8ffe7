"""The JAX engine's device check on one NVIDIA H100 or H200, run by tests/perf/device/jax_gpu.sh: a list of
steps in order of what the figures need, each run only where the time left holds what it will cost (its
cost estimated from what the steps before it measured, not from an H100's times).

    python tests/perf/device/check.py OUT_DIR [--budget-s 470]

Steps (the figures each gives):
  provenance   the code that runs (commit, a clean tree or its diff's hash, the source digest), the machine,
               JAX's version (older than the engine's floor: refused in one line), the GPU used (one, unless
               PODBENCH_DEVICE_GPUS names others)
  synthetic    the default JAX benchmark at the batch (PODBENCH_DEVICE_BATCH, default 512: the fastest of the
               H100's curve) on synthetic data, 500 measured steps and one step profiled (the update probe is
               step "update"'s, at the small batches; the other runs leave it out too)
  jpegs        podbench data make-synthetic-jpegs: 20,000 ImageNet-shaped JPEGs (about 2 GB) on the device host
  input        the grain pipeline alone at 1, 2, 4, 8 and all of the host's cores
  real         the same benchmark on the JPEGs, 500 measured steps: the ratio to synthetic
  overhead     the harness against a bare jitted loop, ABBA rounds, 500 steps a side or more
  update       the optimizer update's share of a step at 16, 32, 64 and 128 images a device (short runs, 16 first)
  levers       the speed levers side by side with the default: --stem-channels 4, --padding symmetric, batches
               768 and 1024 (short points)
  fusion       the last lever, the optimizer update fused into one flat vector (optax.flatten) against the
               engine's per-weight update, alone, 500 updates a side (tests/perf/update_fusion.py); the profile
               (synthetic) counts the kernels XLA made of the per-weight update
  spatial      --spatial-partitions 2: one replica at the batch split over two GPUs (a short point): its
               per-device efficiency against the synthetic run's one GPU, the halo exchanges and gathers, each
               device's activation bytes; only where two GPUs are visible (PODBENCH_DEVICE_GPUS=0,1): with one
               (the lent machine's) or none (the dry run), skipped with the reason in results.json
  torch        the torch engine on the same GPU: `podbench run --framework torch` at batch 256 with its GPU
               defaults (torch.compile, channels_last, bfloat16 autocast), synthetic data, 500 measured steps;
               its rate over the JAX engine's (the synthetic step's) and over DeepLearningExamples' published
               PyTorch figure on an H100 (2,791 img/s, AMP, eager)
  torch_eager, torch_nchw, torch_float32, torch_batch512, torch_cuda_graphs
               one setting changed from torch's defaults each (--no-compile, --no-channels-last, --precision
               float32, --batch-size 512, --cuda-graphs), 500 measured steps each: each rate over the JAX
               engine's and over torch's defaults
  torch_decode the synthetic JPEGs (made by step jpegs, or here if it did not run) under torch, decoded by the
               CPU's grain workers and then on the GPU (--gpu-decode: nvJPEG), 500 measured steps each: each
               run's rate and its input alone (the input bench), GPU over CPU, and each over the JAX engine's
               run on the same JPEGs (step real)
  torch_overhead
               the torch harness against a bare torch loop of the same step (tests/perf/torch_harness_vs_bare.py),
               ABBA rounds, 500 steps a side (the target: 0.99 or more)

Every figure is written to OUT_DIR/results.json as soon as its step ends, with the log in OUT_DIR/log.txt and
every run directory in OUT_DIR/runs.tar.gz at the end: the device tool brings back eight files at most, so the
runs and the JPEGs are made in a work directory beside it (PODBENCH_DEVICE_WORK, default /tmp/podbench-device).
XLA's autotuning warnings ("Delay kernel timed out", "autotun") are counted in each step's log.

The JAX steps come first: the default budget spends itself on them, and each torch step is then skipped by
name with the `--steps` that runs it in a call of its own (`--steps torch,torch_eager,...`: the torch steps'
costs are estimated from the torch step's measured step and start-up times). A later call on the same machine
divides by the JAX rates of the last call that measured them (the work directory keeps its results.json; each
ratio says in `from_an_earlier_call` which rate came from there), and reads the JPEGs it made.

PODBENCH_DEVICE_DRY=1 runs every step at sizes a CPU finishes in a few minutes (32x32 images, ResNet-10, a
few steps, 200 JPEGs): the script's own check (tests/test_perf_device_script.py). There torch runs eager (its
CPU default: torch.compile takes minutes on a CPU), and what a CPU cannot run (--cuda-graphs, --gpu-decode) is
refused in one line, which the step records.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

MIN_JAX = (0, 10, 2)  # setup.cfg's floor: jax.lax.axis_size and the top-level jax.shard_map
MEASURED_STEPS = 500  # a headline figure rests on at least this many
EARLIER_RESULTS = "results-of-the-last-call.json"  # in the work directory
# NVIDIA DeepLearningExamples' PyTorch ResNet-50 v1.5 (AMP, eager, synthetic) on one H100 SXM5 80GB, the highest of
# its rows: lambdal/deeplearning-benchmark pytorch/pytorch-train-throughput-fp16.csv (2,616-2,791 img/s).
DLE_PYTORCH_H100_IMAGES_PER_SEC = 2791
# The torch harness against a bare loop: one round of A B B A (tests/perf/perf_stats.py abba) of overhead_steps
# each, 500 steps a side on the device.
TORCH_OVERHEAD_ROUNDS = 1
# The torch engine's levers, one setting changed from its defaults each: (step, flags, its step time over the
# defaults', a guess for the budget only: eager and NCHW lose what compile and channels_last gain, float32 about
# bfloat16's factor, twice the batch twice the time).
TORCH_LEVERS = (("torch_eager", ("--no-compile",), 1.5), ("torch_nchw", ("--no-channels-last",), 1.5),
                ("torch_float32", ("--precision", "float32"), 3.0), ("torch_batch512", ("--batch-size", "LARGE"), 2.0),
                ("torch_cuda_graphs", ("--cuda-graphs",), 1.0))
AUTOTUNE_WARNINGS = re.compile(r"Delay kernel timed out|autotun", re.IGNORECASE)


@dataclass(frozen=True)
class Sizes:
    """What each step runs: the device's sizes, or a CPU's for the dry run."""

    model: tuple[str, ...]
    batch: int
    measured: int
    warmup: int
    jpegs: int
    workers: tuple[int, ...]
    overhead_steps: int
    overhead_rounds: int
    update_batches: tuple[int, ...]
    update_steps: int
    lever_steps: int
    lever_batches: tuple[int, ...]
    input_images: int
    torch_batch: int  # the torch engine's runs (DeepLearningExamples' batch a GPU)
    torch_large_batch: int  # its lever
    torch_warmup: int  # a torch run's warm-up and measured steps (the dry run's as few as run at all: each of
    torch_measured: int  # its runs costs mostly its start, torch's import and the model's build)


def sizes(dry: bool) -> Sizes:
    cores = os.cpu_count() or 1
    workers = tuple(sorted({w for w in (1, 2, 4, 8) if w <= cores} | {cores}))
    if dry:
        return Sizes(("--image-size", "32", "--depth", "10"), 4, 8, 4, 200, workers[:2], 4, 2, (2, 4), 8, 8, (8,), 64,
                     2, 4, 1, 2)
    # The harness against the bare loop: 2 rounds of 250 steps a side, 500 each (ABBA: one round each way).
    return Sizes((), int(os.environ.get("PODBENCH_DEVICE_BATCH", "512")), MEASURED_STEPS, 50, 20_000, workers, 250, 2,
                 (16, 32, 64, 128), 120, 150, (768, 1024), 4096, 256, 512, 50, MEASURED_STEPS)


@dataclass
class Check:
    """The run's state: where things go, the budget, what was measured so far."""

    out: Path
    work: Path
    budget_s: float
    dry: bool
    started: float = field(default_factory=time.monotonic)
    results: dict = field(default_factory=dict)
    costs: dict = field(default_factory=dict)  # what steps cost: "compile_s", "step_s" (synthetic, the batch)
    earlier: dict = field(default_factory=dict)  # an earlier call's results on this machine (its work directory)

    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def say(self, text: str) -> None:
        line = f"== +{time.monotonic() - self.started:.0f}s {text}"
        print(line, flush=True)
        with open(self.out / "log.txt", "a", encoding="utf-8") as log:
            log.write(line + "\n")

    def save(self) -> None:
        (self.out / "results.json").write_text(json.dumps(self.results, indent=2, default=str) + "\n")
        # For a later call's ratios (a warm machine keeps it): what this call measured over what earlier ones did.
        (self.work / EARLIER_RESULTS).write_text(json.dumps({**self.earlier, **self.results}, default=str) + "\n")

    def podbench(self, *args: str, timeout_s: float, name: str) -> subprocess.CompletedProcess:
        """`python -m bench.cli ARGS`, its stderr into the log; the step's autotuning warnings counted."""
        done = run([sys.executable, "-m", "bench.cli", *args], timeout_s)
        with open(self.out / "log.txt", "a", encoding="utf-8") as log:
            log.write(done.stderr)
        warnings = len(AUTOTUNE_WARNINGS.findall(done.stderr))
        self.results.setdefault("autotuning_warnings", {})[name] = warnings
        return done


def run(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=max(1.0, timeout_s), cwd=REPO)
    except subprocess.TimeoutExpired as err:
        return subprocess.CompletedProcess(argv, 124, err.stdout or "", (err.stderr or "") + "\n[cut short]\n")
    except OSError as err:  # no such program here (nvidia-smi on a CPU)
        return subprocess.CompletedProcess(argv, 127, "", f"{argv[0]}: {err.strerror}\n")


def summary_of(done: subprocess.CompletedProcess) -> dict | None:
    try:
        return json.loads(done.stdout)
    except ValueError:
        return None


def lifecycle(run_dir: Path, event: str) -> dict | None:
    try:
        lines = (run_dir / "lifecycle.jsonl").read_text().splitlines()
    except OSError:
        return None
    found = [json.loads(line) for line in lines if line.strip()]
    return next((e for e in reversed(found) if e.get("event") == event), None)


def figure(s: dict | None) -> dict:
    """The figures a step keeps of a run's summary."""
    if not s:
        return {"status": "no summary"}
    keys = ("status", "error", "framework", "device_kind", "per_replica_batch_size", "precision", "images_per_sec",
            "images_per_sec_uncertainty", "images_per_sec_jitter", "measured_steps", "step_time_s", "mfu",
            "mfu_measured", "weight_update", "update_time_s", "update_share", "optimizer_state_bytes_per_device",
            "input_images_per_sec", "input_bound", "input_wait_share", "synthetic_jpegs", "spatial_partitions",
            "num_devices", "activation_bytes_per_device", "halo_exchanges", "spatial_gathers", "framework_version",
            "torch_compile", "channels_last", "cuda_graphs", "gpu_decode", "results_dir")
    return {k: s.get(k) for k in keys}


# --- the steps ---------------------------------------------------------------------------------------------

def step_provenance(c: Check, z: Sizes) -> None:
    import jax  # noqa: PLC0415

    version = tuple(int(p) for p in re.findall(r"\d+", jax.__version__)[:3])
    if version < MIN_JAX:
        raise SystemExit(f"error: jax {jax.__version__} is older than the JAX engine's floor "
                         f"{'.'.join(map(str, MIN_JAX))}: install jax>={'.'.join(map(str, MIN_JAX))}")
    from bench.harness import host  # noqa: PLC0415

    smi = run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"], 20)
    c.results["provenance"] = {**host.provenance(), "commit_asked": os.environ.get("PODBENCH_COMMIT"),
                               "python": sys.version.split()[0], "jax": jax.__version__, **torch_versions(),
                               "devices": [str(d) for d in jax.devices()],
                               "gpus_listed": smi.stdout.strip().splitlines() if smi.returncode == 0 else [],
                               "gpus_used": os.environ.get("CUDA_VISIBLE_DEVICES", "all"), "dry_run": c.dry}


def _length(z: Sizes, measured: int) -> tuple[str, ...]:
    """A run of ``measured`` steps after the warm-up, in one epoch (the schedule, compiled into the step, then
    depends on the length alone: runs of one batch and one length share XLA's cache)."""
    total = z.warmup + measured
    return ("--steps-per-epoch", str(total), "--train-steps", str(total), "--warmup-steps", str(z.warmup))


def step_synthetic(c: Check, z: Sizes) -> None:
    start = time.monotonic()
    run_dir = c.work / "runs" / "synthetic"
    # The update probe runs at the small batches (step_update), where its share is worth a second compile.
    done = c.podbench("run", "--framework", "jax", "--batch-size", str(z.batch), *_length(z, z.measured), *z.model,
                      "--no-update-probe", "--profile-step", "--output", str(run_dir), "--json",
                      timeout_s=c.left_s() - 10, name="synthetic")
    s = summary_of(done)
    c.results["synthetic"] = figure(s)
    model = lifecycle(run_dir, "model") or {}
    c.results["synthetic"]["compile_s"] = model.get("compile_s")
    c.results["profile"] = lifecycle(run_dir, "step_profile")
    if s and s.get("step_time_s"):
        c.costs.update(step_s=s["step_time_s"]["median"], compile_s=model.get("compile_s") or 60.0,
                       run_overhead_s=time.monotonic() - start - (z.warmup + z.measured) * s["step_time_s"]["median"])


def step_jpegs(c: Check, z: Sizes) -> None:
    start = time.monotonic()
    data = c.work / "jpegs"
    done = c.podbench("data", "make-synthetic-jpegs", "--out", str(data), "--train-images", str(z.jpegs),
                      "--validation-images", "0", timeout_s=c.left_s() - 10, name="jpegs")
    c.results["jpegs"] = {"returncode": done.returncode, "images": z.jpegs, "seconds": time.monotonic() - start,
                          "bytes": sum(p.stat().st_size for p in data.rglob("*") if p.is_file()) if data.exists() else 0}


def step_input(c: Check, z: Sizes) -> None:
    rates = []
    for workers in z.workers:
        done = c.podbench("data", "bench", "--framework", "jax", "--data-dir", str(c.work / "jpegs"), "--workers",
                          str(workers), "--batches", str(max(2, z.input_images // z.batch)), "--batch-size",
                          str(z.batch), "--json", timeout_s=min(120.0, c.left_s() - 10), name=f"input-{workers}")
        found = summary_of(done) or {}
        rates.append({"workers": workers, "images_per_sec": found.get("images_per_sec"),
                      "returncode": done.returncode})
        c.results["input"] = rates
        c.save()


def step_real(c: Check, z: Sizes) -> None:
    run_dir = c.work / "runs" / "jpegs"
    done = c.podbench("run", "--framework", "jax", "--data", "imagenet", "--data-dir", str(c.work / "jpegs"),
                      "--batch-size", str(z.batch), *_length(z, z.measured), *z.model, "--no-peak", "--no-update-probe",
                      "--output", str(run_dir), "--json", timeout_s=c.left_s() - 10, name="real")
    c.results["real"] = figure(summary_of(done))
    synthetic = c.results.get("synthetic", {}).get("images_per_sec")
    real = c.results["real"].get("images_per_sec")
    c.results["real"]["ratio_to_synthetic"] = real / synthetic if real and synthetic else None


def step_overhead(c: Check, z: Sizes) -> None:
    report = c.work / "runs" / "overhead.json"
    length = _length(z, z.measured)
    argv = [sys.executable, "tests/perf/jax_overhead.py", "--batch-size", str(z.batch), "--steps",
            str(z.overhead_steps), "--rounds", str(z.overhead_rounds), length[0], length[1], length[2], length[3],
            *z.model, "--out", str(report)]
    done = run(argv, c.left_s() - 10)
    with open(c.out / "log.txt", "a", encoding="utf-8") as log:
        log.write(done.stderr)
    c.results["overhead"] = json.loads(report.read_text()) if report.exists() else {"returncode": done.returncode}


def step_update(c: Check, z: Sizes) -> None:
    """The update's share of a step at small batches a device, smallest first (short points: say so)."""
    rows = []
    for batch in z.update_batches:
        step_s = c.costs.get("step_s", 0.0) * batch / z.batch + 0.002  # a step's fixed part stays
        cost = 2 * c.costs.get("compile_s", 60.0) + (z.warmup + z.update_steps + 30) * step_s + 15
        if c.costs.get("step_s") and cost > c.left_s() - 10:
            rows.append({"per_replica_batch_size": batch, "skipped": f"{c.left_s():.0f} s left, about {cost:.0f}"})
            continue
        done = c.podbench("run", "--framework", "jax", "--batch-size", str(batch), *_length(z, z.update_steps),
                          *z.model, "--update-probe", "--no-peak", "--output", str(c.work / "runs" / f"update-{batch}"),
                          "--json", timeout_s=c.left_s() - 10, name=f"update-{batch}")
        s = summary_of(done) or {}
        rows.append({k: s.get(k) for k in ("per_replica_batch_size", "images_per_sec", "update_time_s",
                                           "update_share", "update_probe", "measured_steps", "status")})
        c.results["update"] = rows
        c.save()
    c.results["update"] = rows
    c.results["update_note"] = f"short points: {z.update_steps} measured steps a batch"


def step_levers(c: Check, z: Sizes) -> None:
    """The speed levers beside the default, each a short run (say so), the default among them again."""
    levers = [("default", ()), ("stem4", ("--stem-channels", "4")), ("symmetric", ("--padding", "symmetric"))]
    levers += [(f"batch-{b}", ("--batch-size", str(b))) for b in z.lever_batches]
    rows = []
    for name, flags in levers:
        per_step = c.costs.get("step_s", 1.0) * (int(flags[1]) / z.batch if flags[:1] == ("--batch-size",) else 1)
        cost = c.costs.get("compile_s", 60.0) + (z.warmup + z.lever_steps) * per_step + 15
        if cost > c.left_s() - 10:
            rows.append({"lever": name, "skipped": f"{c.left_s():.0f} s left, it would take about {cost:.0f}"})
            continue
        batch = ("--batch-size", str(z.batch)) if flags[:1] != ("--batch-size",) else ()
        done = c.podbench("run", "--framework", "jax", *batch, *flags, *_length(z, z.lever_steps), *z.model,
                          "--no-peak", "--no-update-probe", "--output", str(c.work / "runs" / f"lever-{name}"), "--json",
                          timeout_s=c.left_s() - 10, name=f"lever-{name}")
        rows.append({"lever": name, **figure(summary_of(done))})
        c.results["levers"] = rows
        c.save()
    c.results["levers"] = rows
    c.results["levers_note"] = f"short points: {z.lever_steps} measured steps each, the default run again among them"


def step_fusion(c: Check, z: Sizes) -> None:
    """The update fused against per-weight, alone (tests/perf/update_fusion.py), ABBA rounds."""
    rounds, updates = (2, 2) if c.dry else (10, 50)
    done = run([sys.executable, "tests/perf/update_fusion.py", "--rounds", str(rounds), "--updates", str(updates)],
               c.left_s() - 10)
    with open(c.out / "log.txt", "a", encoding="utf-8") as log:
        log.write(done.stderr)
    c.results["fusion"] = summary_of(done) or {"returncode": done.returncode}
    profile = c.results.get("profile") or {}
    if profile.get("kernels_per_step"):
        c.results["fusion"]["profile_update_kernels_per_step"] = profile["kernels_per_step"].get("optimizer update")
        c.results["fusion"]["profile_weight_tensors"] = profile.get("weight_tensors")


def step_spatial(c: Check, z: Sizes) -> None:
    """One replica at the batch split 2-way over two GPUs, against the synthetic run's one GPU. With fewer than
    two GPUs visible (the lent machine's one; a dry run's CPU, whose `podbench run --spatial-partitions` the
    tests run: tests/test_train_jax_spatial.py) there is nothing to split over: skipped, and why."""
    import jax  # noqa: PLC0415

    visible = [d for d in jax.devices() if d.platform == "gpu"]
    if len(visible) < 2:
        c.results["spatial"] = {"skipped": f"{len(visible)} GPU visible: --spatial-partitions 2 splits a replica over "
                                           "two (give PODBENCH_DEVICE_GPUS=0,1 on a machine with two)"}
        return
    done = c.podbench("run", "--framework", "jax", "--replicas", "1", "--spatial-partitions", "2", "--batch-size",
                      str(z.batch), *_length(z, z.lever_steps), *z.model, "--no-peak", "--no-update-probe",
                      "--output", str(c.work / "runs" / "spatial-2"), "--json", timeout_s=c.left_s() - 10,
                      name="spatial")
    c.results["spatial"] = figure(summary_of(done))
    whole, split = c.results.get("synthetic", {}).get("images_per_sec"), c.results["spatial"].get("images_per_sec")
    c.results["spatial"]["per_device_efficiency"] = split / 2 / whole if whole and split else None
    c.results["spatial_note"] = f"a short point: {z.lever_steps} measured steps, against the synthetic run's rate"


# --- the torch engine on the same GPU ---------------------------------------------------------------------

def torch_versions() -> dict:
    """torch's and torchvision's versions and whether torch sees CUDA, as the torch steps will find them (each
    None where it does not import)."""
    found = {"torch": None, "torchvision": None, "torch_cuda": None}
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        return found
    found.update(torch=torch.__version__, torch_cuda=torch.cuda.is_available())
    try:
        import torchvision  # noqa: PLC0415
    except Exception as err:  # noqa: BLE001 (a CPU-only torch: "operator torchvision::nms does not exist")
        found["torchvision"] = f"does not import: {type(err).__name__}: {str(err).splitlines()[0][:200]}"
    else:
        found["torchvision"] = torchvision.__version__
    return found


def _refusal(done: subprocess.CompletedProcess) -> str | None:
    """The one `error:` line of a run refused before it started (exit 2), else None."""
    if done.returncode != 2:
        return None
    return next((line for line in done.stderr.splitlines() if line.startswith("error:")), done.stderr.strip()[-300:])


def _ratios(row: dict, c: Check, base: str = "synthetic") -> dict:
    """``row``'s rate over the JAX engine's (step ``base``'s: this call's, else an earlier call's on this machine,
    said) and over torch's defaults (step torch's, the same way)."""
    def measured(step: str) -> tuple[dict, bool]:
        here = c.results.get(step) or {}
        if here.get("images_per_sec"):
            return here, False
        return c.earlier.get(step) or {}, bool((c.earlier.get(step) or {}).get("images_per_sec"))

    rate = row.get("images_per_sec")
    (jax_row, jax_earlier), (torch_row, torch_earlier) = measured(base), measured("torch")
    jax_rate, torch_rate = jax_row.get("images_per_sec"), torch_row.get("images_per_sec")
    return {"ratio_to_jax": rate / jax_rate if rate and jax_rate else None,
            "jax_batch": jax_row.get("per_replica_batch_size"),
            "ratio_to_torch_defaults": rate / torch_rate if rate and torch_rate else None,
            "from_an_earlier_call": [name for name, earlier in ((base, jax_earlier), ("torch", torch_earlier))
                                     if earlier]}


def _torch_length(z: Sizes) -> tuple[str, ...]:
    """A torch run's ``torch_measured`` steps after ``torch_warmup``, in one epoch (as ``_length``)."""
    total = z.torch_warmup + z.torch_measured
    return ("--steps-per-epoch", str(total), "--train-steps", str(total), "--warmup-steps", str(z.torch_warmup))


def torch_run(c: Check, z: Sizes, name: str, *flags: str, batch: int | None = None, peak: bool = False) -> dict:
    """One `podbench run --framework torch` on synthetic data (unless ``flags`` give data): its figures, or
    the line that refused it (a CPU has no CUDA graphs and no nvJPEG)."""
    done = c.podbench("run", "--framework", "torch", "--batch-size", str(batch or z.torch_batch),
                      *_torch_length(z), *z.model, *flags, *(() if peak else ("--no-peak",)),
                      "--no-update-probe", "--output", str(c.work / "runs" / name), "--json",
                      timeout_s=c.left_s() - 10, name=name)
    refused = _refusal(done)
    return {"refused": refused} if refused else figure(summary_of(done))


def step_torch(c: Check, z: Sizes) -> None:
    """torch's defaults on the GPU (torch.compile, channels_last, bfloat16): the headline torch figure."""
    start = time.monotonic()
    row = torch_run(c, z, "torch", peak=True)
    c.results["torch"] = row
    row.update(_ratios(row, c))
    rate = row.get("images_per_sec")
    row["ratio_to_dle_h100"] = rate / DLE_PYTORCH_H100_IMAGES_PER_SEC if rate else None
    row["dle_h100_images_per_sec"] = DLE_PYTORCH_H100_IMAGES_PER_SEC
    if row.get("step_time_s"):
        step_s = row["step_time_s"]["median"]
        c.costs.update(torch_step_s=step_s,
                       torch_run_overhead_s=time.monotonic() - start - (z.torch_warmup + z.torch_measured) * step_s)


def torch_lever(name: str, flags: tuple[str, ...]):
    """The step that runs torch with one of its settings changed (TORCH_LEVERS)."""
    def step(c: Check, z: Sizes) -> None:
        large = flags == ("--batch-size", "LARGE")
        row = torch_run(c, z, name, *(() if large else flags), batch=z.torch_large_batch if large else None)
        row.update(_ratios(row, c))
        c.results[name] = {"flags": list(flags), **row}
    return step


def step_torch_decode(c: Check, z: Sizes) -> None:
    """The JPEGs decoded by the CPU's grain workers, then on the GPU (nvJPEG), each a run of 500 measured steps."""
    data = c.work / "jpegs"
    if not data.exists():
        c.say("torch_decode: making the JPEGs first (step jpegs did not run in this call)")
        step_jpegs(c, z)
    rows = {}
    for where, flags in (("cpu", ()), ("gpu", ("--gpu-decode",))):
        row = torch_run(c, z, f"torch-decode-{where}", "--data", "imagenet", "--data-dir", str(data), *flags)
        row.update(_ratios(row, c, base="real"))
        rows[where] = row
        c.results["torch_decode"] = rows
        c.save()
    cpu, gpu = (rows[w].get("images_per_sec") for w in ("cpu", "gpu"))
    cpu_in, gpu_in = (rows[w].get("input_images_per_sec") for w in ("cpu", "gpu"))
    rows["gpu_over_cpu"] = gpu / cpu if cpu and gpu else None
    rows["input_gpu_over_cpu"] = gpu_in / cpu_in if cpu_in and gpu_in else None
    rows["host_cores"] = os.cpu_count()


def step_torch_overhead(c: Check, z: Sizes) -> None:
    """The torch harness against a bare torch loop of the same step, ABBA rounds (the target: >= 0.99)."""
    report = c.work / "runs" / "torch-overhead.json"
    model = dict(zip(z.model[::2], z.model[1::2]))
    steps = z.torch_measured if c.dry else z.overhead_steps  # the dry run's CPU: as few as make a ratio
    argv = [sys.executable, "tests/perf/torch_harness_vs_bare.py", "--batch-size", str(z.torch_batch), "--steps",
            str(steps), "--rounds", str(TORCH_OVERHEAD_ROUNDS), "--image-size",
            model.get("--image-size", "224"), "--depth", model.get("--depth", "50"), "--out", str(report)]
    done = run(argv, c.left_s() - 10)
    with open(c.out / "log.txt", "a", encoding="utf-8") as log:
        log.write(done.stderr)
    c.results["torch_overhead"] = json.loads(report.read_text()) if report.exists() else {
        "returncode": done.returncode, "error": done.stderr[-500:]}


STEPS = (("synthetic", step_synthetic), ("jpegs", step_jpegs), ("input", step_input), ("real", step_real),
         ("overhead", step_overhead), ("update", step_update), ("levers", step_levers),
         ("fusion", step_fusion), ("spatial", step_spatial), ("torch", step_torch),
         *((name, torch_lever(name, flags)) for name, flags, _ in TORCH_LEVERS),
         ("torch_decode", step_torch_decode), ("torch_overhead", step_torch_overhead))


def cost_of(name: str, c: Check, z: Sizes) -> float:
    """What a step will take, from what the synthetic run measured (its step and compile times); a torch
    step's from what the torch step measured."""
    if name.startswith("torch"):
        return torch_cost_of(name, c, z)
    step_s, compile_s = c.costs.get("step_s"), c.costs.get("compile_s", 60.0)
    if step_s is None:
        return 0.0  # nothing measured yet: the synthetic run itself, or a dry run's CPU
    overhead_s = c.costs.get("run_overhead_s", 30.0)
    return {"jpegs": 30.0 + z.jpegs / 2000, "input": 15.0 * len(z.workers),
            "real": overhead_s + (z.warmup + z.measured) * step_s * 1.1,
            "overhead": 20.0 + compile_s * 0.2 + 2 * z.overhead_rounds * z.overhead_steps * step_s,
            "update": 2 * compile_s + 15,  # the smallest batch's; the step weighs each batch's itself
            "levers": 0.0, "fusion": 30.0,
            "spatial": 0.0 if os.environ.get("CUDA_VISIBLE_DEVICES", "0").count(",") == 0 else  # skipped: one GPU
            compile_s * 1.5 + (z.warmup + z.lever_steps) * step_s + 15}.get(name, 0.0)


def torch_cost_of(name: str, c: Check, z: Sizes) -> float:
    """A torch step's cost: its runs' start-up, compilation included, and their steps, at torch's measured step
    time (the JAX engine's at torch's batch until torch's is measured: torch's defaults run at least as long)."""
    step_s = c.costs.get("torch_step_s")
    if step_s is None and c.costs.get("step_s") is None:
        return 0.0  # nothing measured yet
    if step_s is None:
        step_s = c.costs["step_s"] * z.torch_batch / z.batch
    start_s = c.costs.get("torch_run_overhead_s", 60.0)
    steps = z.torch_warmup + z.torch_measured
    factors = {lever: factor for lever, _, factor in TORCH_LEVERS}
    if name in factors:
        return start_s + steps * step_s * factors[name]
    return {"torch": start_s + steps * step_s,
            "torch_decode": 2 * (start_s + steps * step_s * 1.5) + (0.0 if (c.work / "jpegs").exists() else
                                                                   30.0 + z.jpegs / 2000),
            "torch_overhead": start_s + 4 * TORCH_OVERHEAD_ROUNDS * z.overhead_steps * step_s}.get(name, 0.0)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out")
    p.add_argument("--budget-s", type=float, default=470.0, help="the whole check's (the device tool allows 600)")
    p.add_argument("--steps", default=",".join(name for name, _ in STEPS), help="which steps, in order")
    args = p.parse_args(argv)
    dry = os.environ.get("PODBENCH_DEVICE_DRY") == "1"
    out = Path(args.out).resolve()
    work = Path(os.environ.get("PODBENCH_DEVICE_WORK", "/tmp/podbench-device")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    (work / "runs").mkdir(parents=True, exist_ok=True)
    c, z = Check(out, work, args.budget_s, dry), sizes(dry)
    try:  # the JAX rates a torch step is divided by, where this call does not measure them again
        c.earlier = json.loads((work / EARLIER_RESULTS).read_text())
    except (OSError, ValueError):
        c.earlier = {}
    c.say(f"provenance ({'a dry run on this CPU' if dry else 'the device'})")
    step_provenance(c, z)
    c.save()
    chosen = args.steps.split(",")
    for name, step in STEPS:
        if name not in chosen:
            continue
        cost = cost_of(name, c, z)
        if cost > c.left_s():
            c.say(f"{name}: skipped ({c.left_s():.0f} s left, it would take about {cost:.0f}; run it in another "
                  f"call: --steps {name})")
            c.results.setdefault("skipped", []).append(name)
            c.save()
            continue
        c.say(f"{name} (about {cost:.0f} s of {c.left_s():.0f} left)")
        try:
            step(c, z)
        except Exception as err:  # noqa: BLE001 (a step that fails leaves the others theirs)
            c.results.setdefault("failed", {})[name] = f"{type(err).__name__}: {err}"
            c.say(f"{name}: failed ({type(err).__name__}: {err})")
        c.save()
    with tarfile.open(out / "runs.tar.gz", "w:gz") as tar:
        tar.add(work / "runs", arcname="runs")
    c.say("done")
    print(json.dumps({k: c.results.get(k) for k in ("synthetic", "real", "overhead", "update", "torch")}, indent=1,
                     default=str)[-6000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What any run ran on, whichever engine: the host's CPU, the podbench checkout, package versions, and the
devices' peaks as environment.json records them (datasheet or nominal, and measured). No framework.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform as host_platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.harness.peak_probe import MeasuredPeak
from methodology import mfu, peaks

_REPO = Path(__file__).resolve().parent.parent.parent


def cpu_info(cpuinfo_path: str = "/proc/cpuinfo") -> dict:
    """Model name, usable vCPUs, clock in GHz and ISA flags of the host CPU."""
    text = ""
    try:
        text = Path(cpuinfo_path).read_text()
    except OSError:
        pass
    model = _field(text, "model name") or host_platform.processor() or "unknown CPU"
    nominal = re.search(r"@\s*([\d.]+)\s*GHz", model)
    mhz = _field(text, "cpu MHz")
    ghz = float(nominal.group(1)) if nominal else (float(mhz) / 1000 if mhz else None)
    num_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "model": model,
        "num_cpus": num_cpus,
        "ghz": ghz,
        "ghz_source": "model name" if nominal else "cpu MHz (current clock)",
        "isa_flags": sorted(set((_field(text, "flags") or "").split()) & peaks.CPU_PEAK_FLAGS),
    }


def _field(text: str, key: str) -> str | None:
    match = re.search(rf"^{re.escape(key)}\s*:\s*(.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


# What the code of a run is: every file these hold that the run can import or read (modules, catalogues).
SOURCE_DIRS = ("bench", "models", "methodology")
SOURCE_SUFFIXES = (".py", ".csv")


def source_digest(root: Path = _REPO) -> str:
    """SHA-256 of podbench's own code as it is on disk (each file's path and content, in path order).

    It names the code a run ran where git cannot: a copy of a checkout without .git (the device tool's),
    or a tree with local changes. The same digest from a clean checkout of a commit says the run ran
    that commit's code (tests/perf/device/provenance.py checks it)."""
    whole = hashlib.sha256()
    files = sorted(p for d in SOURCE_DIRS for p in (root / d).rglob("*")
                   if p.suffix in SOURCE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts)
    for path in files:
        whole.update(path.relative_to(root).as_posix().encode() + b"\0")
        whole.update(hashlib.sha256(path.read_bytes()).digest())
    return whole.hexdigest()


# git (2.35.2 on) refuses a repository another user owns (a bind mount in a container, a copy made as root):
# "fatal: detected dubious ownership in repository at '/path'".
_DUBIOUS = re.compile(r"dubious ownership in repository at '([^']+)'")


@dataclass(frozen=True)
class Checkout:
    """The git repository a directory lies in, as git read it.

    Attributes:
      commit: its HEAD.
      top: its top level (`git rev-parse --show-toplevel`): podbench's own directory, or another project's
        repository that holds it.
      dubious: the directory git called of dubious ownership (read with ``safe.directory`` for that one
        call, the user's git config untouched); None where git took it as it is.
    """

    commit: str
    top: str
    dubious: str | None = None

    def git(self, root: Path, *args: str) -> list[str]:
        """A git command line over ``root`` that reads this checkout as the first read did."""
        return _git_argv(root, self.dubious, *args)


def _git_argv(root: Path, safe: str | None, *args: str) -> list[str]:
    return ["git", *(("-c", f"safe.directory={safe}") if safe else ()), "-C", str(root), *args]


def checkout(root: Path = _REPO) -> Checkout | None:
    """The git repository ``root`` lies in (None: none, or no git)."""
    safe = None
    for _ in range(2):
        try:
            done = subprocess.run(_git_argv(root, safe, "rev-parse", "--show-toplevel", "HEAD"), capture_output=True,
                                  text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        lines = done.stdout.split("\n")
        if done.returncode == 0 and len(lines) >= 2 and lines[1].strip():
            return Checkout(lines[1].strip(), lines[0].strip(), safe)
        dubious = _DUBIOUS.search(done.stderr)
        if dubious is None or safe is not None:
            return None
        safe = dubious.group(1)
    return None


def own_checkout(root: Path = _REPO) -> tuple[Checkout | None, str | None]:
    """(podbench's own checkout, None) where ``root`` is a repository's top level; (None, why) where it lies
    inside another project's repository, whose commit is not podbench's version; (None, None): no git."""
    found = checkout(root)
    if found is None:
        return None, None
    try:
        own = os.path.samefile(found.top, root)
    except OSError:
        own = False
    if own:
        return found, None
    dubious = f", {_dubious_words(found.dubious)}" if found.dubious else ""
    return None, (f"{root} lies inside another repository ({found.top}, commit {found.commit[:12]}{dubious}): that "
                  "commit is not podbench's version")


def provenance(root: Path = _REPO) -> dict:
    """environment.json's account of the code that ran: the commit, whether the tree was clean (and if not,
    a hash of its diff), the source digest, and one sentence saying which.

    The commit is podbench's only where ``root`` is a repository's top level; a checkout git calls of dubious
    ownership (another user's) is read all the same, and the sentence says so."""
    found, outer = own_checkout(root)
    sha, diff = (found.commit, None) if found else (None, None)
    try:
        if found is not None:
            changes = subprocess.run(found.git(root, "diff", "HEAD", "--", *SOURCE_DIRS), capture_output=True,
                                     timeout=10, check=True).stdout
            # A new file git does not track yet is code the run may import (and the source digest reads) too.
            untracked = subprocess.run(found.git(root, "ls-files", "--others", "--exclude-standard", "-z", "--",
                                                 *SOURCE_DIRS), capture_output=True, timeout=10, check=True).stdout
            for name in sorted(n for n in untracked.decode().split("\0") if n.endswith(SOURCE_SUFFIXES)):
                changes += b"\0new file " + name.encode() + b"\0" + (root / name).read_bytes()
            diff = hashlib.sha256(changes).hexdigest() if changes else None
    except (OSError, subprocess.SubprocessError):
        found, sha, diff = None, None, None
    digest = source_digest(root)
    if sha is None:
        where = f"{outer};" if outer else "no git checkout here:"
        words = f"{where} the code is identified by its source digest {digest[:12]} only"
    elif diff is None:
        words = f"commit {sha[:12]}, a clean tree"
    else:
        words = (f"commit {sha[:12]} WITH LOCAL CHANGES (the diff's sha256 {diff[:12]}): not that commit's code; "
                 f"source digest {digest[:12]}")
    if found is not None and found.dubious:
        words += f" ({_dubious_words(found.dubious)})"
    return {"podbench_commit": sha, "podbench_diff_sha256": diff, "podbench_source_sha256": digest,
            "podbench_provenance": words}


def _dubious_words(path: str) -> str:
    try:
        owner = f"owned by uid {os.stat(path).st_uid}, "
    except OSError:
        owner = ""
    return (f"git called {path} of dubious ownership ({owner}this process runs as uid {os.geteuid()}): read with "
            "safe.directory for this one call, the git config left as it is")


def git_sha() -> str | None:
    """The podbench checkout's commit, with "-dirty" if it has local changes (None: not its own checkout)."""
    found, _ = own_checkout(_REPO)
    if found is None:
        return None
    try:
        dirty = subprocess.run(found.git(_REPO, "status", "--porcelain", "--untracked-files=no"),
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return found.commit + ("-dirty" if dirty else "")


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def datasheet_peak(platform: str, num_replicas: int, cpu: dict, precision: str,
                   gpu: tuple[str, tuple | None] | None = None, tpu_type: str | None = None, hosts: int = 1,
                   tf32: bool = False) -> tuple[mfu.Peak | None, int, str]:
    """(one device's datasheet or nominal peak, how many such devices, "datasheet" or "nominal").

    A device is a GPU, a TPU chip, or a CPU host (its logical devices share it).
    ``tf32``: float32 matmuls run in TF32 (the framework's setting), whose peak then counts.
    """
    if platform == "cpu":
        if not cpu["ghz"]:
            return None, hosts, mfu.NOMINAL
        return peaks.cpu_peak(cpu["num_cpus"], cpu["ghz"], set(cpu["isa_flags"]), precision), hosts, mfu.NOMINAL
    if platform == "gpu":
        name, capability = gpu or ("GPU", None)
        return peaks.gpu_peak(name, precision, capability, tf32), num_replicas, mfu.DATASHEET
    chips = peaks.tpu_chips(tpu_type)
    peak = peaks.tpu_peak(tpu_type, precision, tf32) if chips else None
    return peak, chips or num_replicas, mfu.DATASHEET


def measured_block(probe: MeasuredPeak, platform: str, num_replicas: int, hosts: int = 1) -> dict:
    """environment.json's ``measured_peak``: one device's measured FLOP/s and how many devices count.

    A CPU's logical devices share the host, so the probe (all of them at once) measured
    the host; accelerators count per replica, every worker's.
    """
    per_host = platform == "cpu"
    return {**probe.to_json(), "local_flops_per_sec": probe.flops_per_sec,
            "flops_per_sec": probe.flops_per_sec if per_host else probe.flops_per_sec_per_device,
            "count": hosts if per_host else num_replicas, "per": "host" if per_host else "replica",
            "basis": f"{probe.dtype} matmul {probe.matrix_size}x{probe.matrix_size}, best of {probe.repetitions} "
                     f"x {probe.matmuls} products, {probe.num_devices} device(s) at once"}

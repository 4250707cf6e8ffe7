"""`podbench peak`: what each local device delivers in a dense matmul, beside what its datasheet promises.

The arguments are checked by their argparse types (bench/cli/checks.py)
before TensorFlow loads; the measuring is
bench/train/local_peaks.py (the same probe every `podbench run` takes under its
own strategy), and the table is rendered here, from the JSON it returns.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

from bench.plan import config as cfg
from bench.cli import checks, engine_checks, xla_flags
from bench.errors import UsageError
from bench.cli.common import text_table
from bench.report.summary_text import flops_text
from bench.results import rundir
from bench.train_jax import packages

MAX_REPETITIONS = 100

_EPILOG = """\
Each device multiplies square matrices (2048x2048 on a CPU, 8192x8192 on a GPU or TPU) in
every precision it computes natively: float32; bfloat16 on a CPU with AVX512_BF16 or AMX;
float16 from Volta and bfloat16 from Ampere on a GPU (float32 there runs in TF32 from
Ampere on, TensorFlow's default); bfloat16 and float32 on a TPU. The clock stops once the
results are back on the host; the best of the repetitions counts. A CPU's nominal peak is
vCPUs x clock x FLOPs a cycle, not an upper bound (its clock boosts); a GPU's or TPU's
datasheet figure comes with its source (methodology/gpu_peaks.csv, tpu_peaks.csv), or is
left unknown where none was found. Every `podbench run` takes the same measurement for its
own precision, under its own strategy, before the warm-up (--no-peak skips it).

Under --framework jax the same probe runs through JAX (bench/train_jax/peak.py): the CPU,
each GPU, and a TPU VM's chips, which JAX finds itself (no --tpu); float32 on a GPU runs
in TF32 there too (JAX's default matmul precision). Under --framework torch it runs
through PyTorch (bench/train_torch/peak.py): the CPU and each GPU torch sees; float32 on a
GPU counts TF32's peak only where torch allows TF32 matmuls (its default does not).

examples:
  podbench peak                 # the CPU and every GPU (a few seconds a device and precision)
  podbench peak --json          # the measurements as JSON on stdout
  podbench peak --tpu local     # on a TPU VM: its chips too
  podbench peak --framework jax # the same, measured through JAX (no TensorFlow needed)
  podbench peak --framework torch  # through PyTorch (neither TensorFlow nor JAX needed)
"""


def register(sub) -> None:
    p = sub.add_parser("peak", help="measure each device's dense-matmul FLOP/s beside its datasheet peak",
                       description="Measure the dense-matmul FLOP/s of each local device in each precision it "
                                   "computes natively, and show the datasheet (or a CPU's nominal) peak beside it.",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print the measurements as JSON")
    p.add_argument("--framework", choices=cfg.FRAMEWORKS, default="tensorflow",
                   help="measure through tensorflow (default), jax or torch, the engine `podbench run --framework` "
                        "trains with")
    p.add_argument("--tpu", metavar="ADDR", type=checks.tpu_address,
                   help="also measure a Cloud TPU: its name, grpc://HOST:PORT, or local")
    p.add_argument("--repetitions", default=5, metavar="N",
                   type=checks.count(1, MAX_REPETITIONS, "each repetition takes about 0.15 s a device and precision"),
                   help=f"timed repetitions per device and precision; the best counts (default 5, 1-{MAX_REPETITIONS})")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.framework == "torch":
        if args.tpu is not None:
            raise UsageError("--tpu names a TPU for TensorFlow's client; the torch engine measures this host's CPU "
                             "and GPUs: drop --tpu")
        engine_checks.check_torch_engine()
        say("podbench peak: loading PyTorch…")
        from bench.train_torch import packages as torch_packages  # noqa: PLC0415

        def importer():
            from bench.train_torch import peak  # noqa: PLC0415 (torch loads here, after every check)
            return peak

        torch_peak = torch_packages.load(importer)
        report = torch_peak.survey(args.repetitions, say=say)
    elif args.framework == "jax":
        if args.tpu is not None:
            raise UsageError("--tpu names a TPU for TensorFlow's client; JAX on a TPU VM measures its chips "
                             "itself: drop --tpu")
        xla_flags.check(os.environ)  # a flag XLA would abort this process for
        say("podbench peak: loading JAX…")
        packages.load(("jax",))  # a JAX whose import fails (a jaxlib of another version): one line
        from bench.train_jax import peak as jax_peak  # noqa: PLC0415 (JAX loads here, after every check)
        report = jax_peak.survey(args.repetitions, say=say)
    else:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ INFO lines would bury the table
        say("podbench peak: loading TensorFlow…")
        from bench.train import local_peaks  # TensorFlow loads here, after every check
        report = local_peaks.survey(args.tpu, args.repetitions, say=say)
    print(rundir.dumps(report) if args.json else format_report(report))
    return 0


def _datasheet(m: dict) -> str:
    sheet = m.get("datasheet")
    return "unknown" if sheet is None else f"{flops_text(sheet['flops_per_sec'])} {sheet['kind']}"


def _ratio(m: dict) -> str:
    sheet = m.get("datasheet")
    if sheet is None or "flops_per_sec_per_device" not in m:
        return ""
    return f"{m['flops_per_sec_per_device'] / sheet['flops_per_sec']:.0%}"


def format_report(report: dict) -> str:
    """`podbench peak`'s table and the sources of its datasheet figures (pure)."""
    rows, sources = [], []
    for device in report["devices"]:
        for m in device["measurements"]:
            rows.append((device, m))
            with contextlib.suppress(KeyError, TypeError):
                sources.append(f"{device['kind']}, {m['dtype']}: {m['datasheet']['basis']}; {m['datasheet']['source']}")

    def cells(row):
        device, m = row
        measured = (f"error: {m['error']}" if "error" in m
                    else f"{flops_text(m['flops_per_sec_per_device'])}")
        return (f"{device['device']} {device['kind']}", m["dtype"], measured, _datasheet(m), _ratio(m),
                f"per {device['per']}")

    table = text_table(rows, ("device", "dtype", "measured", "datasheet/nominal", "measured/sheet", "unit"), cells)
    engine = (f" through JAX {report['jax']}" if report.get("framework") == "jax"
              else f" through PyTorch {report['torch']}" if report.get("framework") == "torch"
              else f" through TensorFlow {report['tensorflow']}" if report.get("tensorflow") else "")
    head = (f"podbench peak: dense matmul FLOP/s{engine}, best of {report['repetitions']}, measured in "
            f"{report['probe_s']:.1f} s")
    return "\n".join([head, table, "", *dict.fromkeys(sources)])

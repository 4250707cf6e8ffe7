"""The reference configurations and the published headline figures, with sources.

What is public (facts §1): the methodology page's configurations, and the
blog's headline claims: a full v2 Pod (v2-512, 256 chips) trains ResNet-50 to
76% in 7.9 minutes, 200x faster than one V100 (over 26 hours), 27x faster and
about 40% cheaper than an 8xV100 VM. The blog's per-configuration chart values
are not public. So every row here says where its throughput comes from:

- "published": the figure is in the blog (only the full Pod's 7.9 min);
- "derived": arithmetic on published figures (1xV100 = Pod/200, 8xV100 = Pod/27);
- "assumption": not published, filled in by a stated rule (linear scaling
  from the nearest derived figure) so the picture is complete. Never present
  these as the blog's.

``modeled_rows`` adds a second estimate beside each assumed v2 slice: the
projection model (methodology/projection.py) run from the full Pod's
published rate, labelled "modeled", never a substitute for a published figure.
"""
from __future__ import annotations

from dataclasses import dataclass

from methodology import all_reduce, cost, interconnect, projection, validation
from methodology.constants import MEASURED_EPOCHS, TARGET_TOP1_MLPERF_V05
from methodology.prices import PriceBook, quote

METHODOLOGY_PAGE = ("tensorflow/tpu benchmarks/ResNet-50_v1.5_Performance_Comparison_"
                    "TensorFlow_1.12_GCP.md (2018-12-11)")
BLOG = ("Google Cloud Blog, Dec 2018: 'Now you can train TensorFlow machine learning models "
        "faster and at lower cost on Cloud TPU Pods'")

# A secondary copy of the headline chart's caption (the chart itself is not public).
PACKT_CAPTION = ("Packt, Deep Learning with TensorFlow 2 and Keras (2nd ed.), ch. 16, Figure 8: "
                 "'A Full Cloud TPU v2 Pod is >200x faster than a V100 Nvidia Tesla GPU'")
NVIDIA_DLE = ("NVIDIA/DeepLearningExamples TensorFlow/Classification/ConvNets/resnet50v1.5/README.md "
              "(20.06-tf1-py3): 1x V100-16G AMP+XLA 1270 img/s")

PUBLISHED, DERIVED, ASSUMPTION, MODELED = "published", "derived", "assumption", "modeled"
# The comparison's date: its modeled rows take the per-step cost K of the TPU software published by then
# (MLPerf v0.5, Dec 2018, TensorFlow 1.12 on TPU v2/v3), not today's.
AS_OF = "2018-12"


@dataclass(frozen=True)
class ReferenceConfig:
    """One configuration of the comparison, as the methodology page ran it.

    Attributes:
      name: label, e.g. "8x V100" or "TPU v2-512".
      hardware: price-catalog name of the accelerator (v100) or slice (v2-512).
      count: accelerators (1 for a slice: it is priced whole).
      host_vm: the VM that drives it.
      replicas: GPUs or TPU cores.
      chips: physical chips (a v2 chip has 2 cores).
      global_batch_size: images a step.
      warmup_steps: steps excluded from timing (read_training_time.py).
      end_step: last step of the 91-epoch run.
      lars_and_label_smoothing: LARS + label smoothing 0.1 (batches >= 16384).
    """

    name: str
    hardware: str
    count: int
    host_vm: str
    replicas: int
    chips: int
    global_batch_size: int
    warmup_steps: int
    end_step: int
    lars_and_label_smoothing: bool = False

    def __post_init__(self):
        for name in ("count", "replicas", "chips", "global_batch_size", "warmup_steps", "end_step"):
            if getattr(self, name) < 1:
                raise ValueError(f"{self.name}: {name} must be >= 1, got {getattr(self, name)}")
        if self.warmup_steps >= self.end_step:
            raise ValueError(f"{self.name}: warmup_steps {self.warmup_steps} >= end_step {self.end_step}")

    @property
    def optimizer(self) -> str:
        """momentum everywhere; LARS for the TPU runs at batch >= 16384 (the methodology page)."""
        return "lars" if self.lars_and_label_smoothing else "momentum"

    @property
    def label_smoothing(self) -> float:
        return 0.1 if self.lars_and_label_smoothing else 0.0


CONFIGS: tuple[ReferenceConfig, ...] = (
    # GPU side: tf_cnn_benchmarks, batch 312 a GPU, fp16 + XLA, momentum.
    ReferenceConfig("1x V100", "v100", 1, "n1-standard-8", 1, 1, 312, 4107, 373674),
    ReferenceConfig("4x V100", "v100", 4, "n1-standard-32", 4, 4, 1248, 1026, 93419),
    ReferenceConfig("8x V100", "v100", 8, "n1-standard-64", 8, 8, 2496, 513, 46710),
    # TPU side: resnet_main.py r1.12, bfloat16, iterations_per_loop = train_steps.
    ReferenceConfig("TPU v2-8", "v2-8", 1, "n1-standard-2", 8, 4, 1024, 1251, 113854),
    ReferenceConfig("TPU v2-32", "v2-32", 1, "n1-standard-2", 32, 16, 4096, 313, 28464),
    ReferenceConfig("TPU v2-128", "v2-128", 1, "n1-standard-2", 128, 64, 16384, 78, 7116, True),
    ReferenceConfig("TPU v2-256", "v2-256", 1, "n1-standard-2", 256, 128, 32768, 39, 3558, True),
    ReferenceConfig("TPU v2-512", "v2-512", 1, "n1-standard-2", 512, 256, 32768, 39, 3558, True),
)

# The blog's headline claims (BLOG); everything else is computed from these.
FULL_POD_MINUTES = 7.9
POD_SPEEDUP_VS_V100X1 = 200
POD_SPEEDUP_VS_V100X8 = 27
V100X1_HOURS_CLAIM = 26  # "over 26 hours"
# NVIDIA DeepLearningExamples ResNet-50 v1.5 (TF1, 20.06 container): 1x V100-16G,
# AMP + XLA, 1270 img/s. An independent check of the 1x V100 rate derived here.
NVIDIA_V100_AMP_XLA_IMAGES_PER_SEC = 1270
POD_SAVING_VS_V100X8_CLAIM = 0.40  # "about 40% cheaper"


# Short labels for the human table; `source` itself stays one word for programs (charts hatch by it).
SOURCE_LABELS = {
    PUBLISHED: "published",
    DERIVED: "derived from headline",
    ASSUMPTION: "assumption, not published",
    MODELED: "modeled, not published",
}


@dataclass(frozen=True)
class ContextResult:
    """A published time of a similar configuration elsewhere: context, not the blog's figure.

    Attributes:
      name: e.g. "MLPerf v0.5 cloud_v2.512".
      config: the reference configuration it resembles (CONFIGS name).
      minutes: the published (or log-computed) time.
      accuracy: the accuracy that time is to (a target) or reached.
      what: what the time includes and how it was aggregated.
      source: where it comes from.
    """

    name: str
    config: str
    minutes: float
    accuracy: str
    what: str
    source: str


_MLPERF_V05 = ("olympic mean of run_stop - run_start: includes evaluation and every epoch to "
               "74.9%, no warm-up excluded")
_TO_V05_TARGET = f"to {TARGET_TOP1_MLPERF_V05:.1%} top-1 (MLPerf v0.5 target)"
_MLPERF_V05_LOGS = "mlcommons/training_results_v0.5 v0.5.0/google/{}/ result logs (computed, facts §6)"
CONTEXT: tuple[ContextResult, ...] = (
    ContextResult("MLPerf v0.5 Google cloud_v2.512 (batch 16384)", "TPU v2-512", 11.25, _TO_V05_TARGET,
                  _MLPERF_V05, _MLPERF_V05_LOGS.format("cloud_v2.512")),
    ContextResult("MLPerf v0.5 Google cloud_v100x8 (batch 2048)", "8x V100", 137.8, _TO_V05_TARGET,
                  _MLPERF_V05, _MLPERF_V05_LOGS.format("cloud_v100x8")),
    ContextResult("MLPerf v0.5 Google cloud_v2.8 (batch 1024)", "TPU v2-8", 301.62, _TO_V05_TARGET,
                  _MLPERF_V05, _MLPERF_V05_LOGS.format("cloud_v2.8")),
    ContextResult("DAWNBench Google v2-8, TF 1.11 (batch 1024)", "TPU v2-8", 8.003 * 60, "reached 76.67% top-1 at epoch 90",
                  "time at epoch 90, including a checkpoint and an evaluation every epoch",
                  "stanford-futuredata/dawn-bench-entries ImageNet/train/google_resnet50_tpu_tensorflow111.tsv"),
)


def config(name: str) -> ReferenceConfig:
    """The reference configuration called ``name`` ("8x V100", "TPU v2-512" ...).

    Raises:
      ValueError: no such configuration; the message lists the known ones.
    """
    for c in CONFIGS:
        if c.name == name:
            return c
    raise ValueError(f"no reference configuration {name!r}; known: {', '.join(c.name for c in CONFIGS)}")


def throughput_basis() -> dict[str, tuple[float, str, str]]:
    """Images/sec of each configuration: (value, kind, how it was obtained).

    Returns:
      {config name: (images_per_sec, PUBLISHED | DERIVED | ASSUMPTION, one-line explanation)}.
    """
    pod = cost.images_per_sec_for_hours(FULL_POD_MINUTES / 60)
    v100x8 = pod / POD_SPEEDUP_VS_V100X8
    per_chip = pod / config("TPU v2-512").chips
    basis = {
        "TPU v2-512": (pod, PUBLISHED, f"published: {FULL_POD_MINUTES} min for 90 epochs (blog headline)"),
        "1x V100": (pod / POD_SPEEDUP_VS_V100X1, DERIVED, "derived: the full Pod's rate / 200 (blog headline)"),
        "8x V100": (v100x8, DERIVED, "derived: the full Pod's rate / 27 (blog headline)"),
        "4x V100": (v100x8 / 2, ASSUMPTION, "assumption: half of 8x V100 (per-GPU rate of 8x V100); not published"),
    }
    for c in CONFIGS:
        if c.name.startswith("TPU") and c.name not in basis:
            basis[c.name] = (per_chip * c.chips, ASSUMPTION,
                             "assumption: the full Pod's per-chip rate (linear scaling); not published")
    return basis


def reference_rows(book: PriceBook, era: str | None = "2018", pricing: str = "on_demand",
                   epochs: float = MEASURED_EPOCHS) -> list[dict]:
    """The comparison table: one row per configuration, in CONFIGS order.

    Args:
      book: the price catalog.
      era: "2018" (the comparison's prices), "current", or None for a user's file.
      pricing: on_demand (the only pricing every configuration has in 2018).
      epochs: measured epochs (90).

    Returns:
      Dicts with config, chips, global_batch_size, images_per_sec, train_hours,
      usd_per_hour, cost_usd, source, source_label, source_detail, price_as_of,
      price_note, price_parts, speedup_vs_v100x1 and cost_ratio_vs_v100x8.

    Raises:
      ValueError: a price the table needs is missing from ``book``.
    """
    basis = throughput_basis()
    rows = []
    for c in CONFIGS:
        ips, kind, how = basis[c.name]
        rows.append(_priced_row(c, ips, kind, how, quote(book, c.hardware, c.count, era, pricing), epochs))
    by_name = {r["config"]: r for r in rows}
    for r in rows:
        r["speedup_vs_v100x1"] = cost.speedup(by_name["1x V100"]["train_hours"], r["train_hours"])
        r["cost_ratio_vs_v100x8"] = cost.cost_ratio(r["cost_usd"], by_name["8x V100"]["cost_usd"])
    return rows


def _priced_row(c, ips: float, kind: str, how: str, q, epochs: float) -> dict:
    """One configuration's row: its rate with where it comes from, and its time and cost over ``epochs``."""
    p = cost.project(ips, q.usd_per_hour, epochs)
    return {
        "config": c.name, "chips": c.chips, "global_batch_size": c.global_batch_size,
        "images_per_sec": ips, "train_hours": p.train_hours, "usd_per_hour": q.usd_per_hour,
        "cost_usd": p.cost_usd, "source": kind, "source_label": SOURCE_LABELS[kind], "source_detail": how,
        "price_as_of": q.as_of, "price_note": q.note, "price_parts": q.parts,
    }


def context_rows() -> list[dict]:
    """Published times of similar configurations elsewhere (MLPerf v0.5, DAWNBench), and MLPerf's ratio.

    These are time-to-accuracy figures with evaluation included, to other
    targets: context for the table, never a substitute for the blog's figures.
    """
    rows = [{"name": r.name, "config": r.config, "minutes": r.minutes, "accuracy": r.accuracy,
             "what": r.what, "source": r.source} for r in CONTEXT]
    mlperf = {r.config: r.minutes for r in CONTEXT if r.name.startswith("MLPerf")}
    for r in rows:
        if r["name"].startswith("MLPerf"):
            r["speedup_of_v2_512"] = cost.speedup(mlperf[r["config"]], mlperf["TPU v2-512"])
    return rows


def headline_check(rows: list[dict]) -> dict:
    """Each headline claim beside what the table reproduces, and whether that is a real check.

    The Pod's time, the 200x and 27x speedups and "over 26 hours" (7.9 min x
    200) hold by construction: the rates were derived from them. Two checks are
    independent: the cost saving (it tests the 2018 prices) and NVIDIA's own
    published V100 rate (it tests the derived 1x V100 figure).
    """
    by_name = {r["config"]: r for r in rows}
    pod, v1, v8 = by_name["TPU v2-512"], by_name["1x V100"], by_name["8x V100"]
    return {
        "full_pod_minutes": {"published": FULL_POD_MINUTES, "reproduced": pod["train_hours"] * 60,
                             "check": "by construction"},
        "v100x1_hours": {"published": f"over {V100X1_HOURS_CLAIM} h", "reproduced": v1["train_hours"],
                         "check": "by construction"},
        "v100x1_images_per_sec": {"published": f"{NVIDIA_V100_AMP_XLA_IMAGES_PER_SEC} (NVIDIA, AMP+XLA)",
                                  "reproduced": v1["images_per_sec"], "check": "independent",
                                  "holds": abs(v1["images_per_sec"] / NVIDIA_V100_AMP_XLA_IMAGES_PER_SEC - 1) < 0.1},
        "speedup_vs_v100x1": {"published": POD_SPEEDUP_VS_V100X1, "reproduced": pod["speedup_vs_v100x1"],
                              "check": "by construction"},
        "speedup_vs_v100x8": {"published": POD_SPEEDUP_VS_V100X8,
                              "reproduced": v8["train_hours"] / pod["train_hours"], "check": "by construction"},
        "cheaper_than_v100x8": {"published": f"about {POD_SAVING_VS_V100X8_CLAIM:.0%}",
                                "reproduced": 1 - pod["cost_ratio_vs_v100x8"], "check": "independent",
                                "holds": abs(1 - pod["cost_ratio_vs_v100x8"] - POD_SAVING_VS_V100X8_CLAIM) < 0.05},
        "sources": {"headline": BLOG, "configurations": METHODOLOGY_PAGE, "headline_copy": PACKT_CAPTION,
                    "v100_rate": NVIDIA_DLE},
    }


def _modeled_rate(c: ReferenceConfig, pod_images_per_sec: float) -> tuple[float, str]:
    """images/sec of TPU slice ``c`` projected from the full Pod's rate, and how."""
    pod = config("TPU v2-512")
    fabric = interconnect.tpu_v2_with_stand_in(interconnect.load_interconnects())
    payload = all_reduce.gradient_bytes()
    pod_batch = pod.global_batch_size // pod.chips
    point = projection.device_point(pod_images_per_sec, pod_batch, pod.chips,
                                    all_reduce.all_reduce_s(fabric, pod.chips, payload))
    batch = c.global_batch_size // c.chips
    k = validation.batch_half_for("tpu", through=AS_OF)
    model = projection.Model(projection.DeviceCurve((point,), k.value), fabric, None, batch, payload,
                             curve_has_sync=True)
    row = projection.project_size(model, c.chips)
    how = (f"modeled (podbench project): the full Pod's rate at {pod_batch} a chip, carried to {batch} a chip "
           f"as b/(b+{k.value:.0f}) (methodology/projection.py; K fitted on {k.basis}: the 2018 TPU software's "
           f"per-step cost), plus a {row.all_reduce_s * 1e3:.2f} ms all-reduce a step on a "
           f"{all_reduce.shape(fabric, c.chips)} (v2's link bandwidth is not published: v3's stands in)")
    return row.images_per_sec, how


def modeled_rows(book: PriceBook, era: str | None = "2018", pricing: str = "on_demand",
                 epochs_measured: float = MEASURED_EPOCHS) -> list[dict]:
    """The TPU slices the table fills by linear scaling, estimated by the projection model instead.

    Args, Returns and Raises as ``reference_rows``; one row per assumed TPU
    slice, its source "modeled". Speedup and cost ratio are against the
    table's 1x V100 and 8x V100 rows.
    """
    basis = throughput_basis()
    by_name = {r["config"]: r for r in reference_rows(book, era, pricing, epochs_measured)}
    rows = []
    for c in CONFIGS:
        if not c.name.startswith("TPU") or basis[c.name][1] != ASSUMPTION:
            continue
        ips, how = _modeled_rate(c, basis["TPU v2-512"][0])
        row = _priced_row(c, ips, MODELED, how, quote(book, c.hardware, c.count, era, pricing), epochs_measured)
        row["speedup_vs_v100x1"] = cost.speedup(by_name["1x V100"]["train_hours"], row["train_hours"])
        row["cost_ratio_vs_v100x8"] = cost.cost_ratio(row["cost_usd"], by_name["8x V100"]["cost_usd"])
        rows.append(row)
    return rows

"""Whether a merged config can run as it stands: the checks that need the whole of it, once a preset (or a
config.json) and the flags are merged, before any platform is known. No framework.

(A preset may choose the TPU strategy; only the user can name the TPU. A warm-up as long as the run is
refused here when the flags alone fix both.)
"""
from __future__ import annotations

from bench.plan.config import RunConfig
from bench.plan import config_torch
from bench.plan.config_jax import check_jax_checkpoint, check_jax_only, check_jax_spatial, check_jax_train

MULTI_WORKER_XLA = ("--xla cannot run under --strategy multi_worker: XLA cannot all-reduce across processes "
                    "(a known TensorFlow limitation); drop --xla (multi_worker runs without XLA by default)")


def check_ready(config: RunConfig) -> RunConfig:
    """Checks that need the whole config, once presets and flags are merged.

    Raises:
      ValueError: the config cannot run as it stands.
    """
    if config.runtime.strategy == "tpu" and not config.runtime.tpu:
        raise ValueError("--strategy tpu needs --tpu NAME, grpc://HOST:PORT or local (on a TPU VM)")
    framework = config.runtime.framework
    if framework == "torch":
        _check_torch(config)
    else:
        config_torch.check_torch_only(config.train, framework)
        config_torch.check_gpu_decode_engine(config.data, framework)
    if framework == "jax":
        check_jax_train(config.train)
        check_jax_checkpoint(config.checkpoint)
        check_jax_spatial(config.model, config.runtime)
    elif framework == "tensorflow":
        check_jax_only(config.runtime, config.measure, config.model)
        if config.runtime.strategy == "multi_worker" and config.train.xla:
            raise ValueError(MULTI_WORKER_XLA)
    if config.train.evaluates and not config.data.real:
        raise ValueError("evaluation needs a validation split: add --data imagenet or --data tfds with --data-dir "
                         "(`podbench data make` writes one from a folder of images)")
    known = _lengths_known_without_platform(config)
    if known is not None and known[0] >= known[1]:
        warmup, total, unit = known
        raise ValueError(
            f"warm-up ({warmup} {unit}{'s' * (warmup != 1)}) must be shorter than the run "
            f"({total} {unit}{'s' * (total != 1)}): raise --epochs/--train-steps or lower --warmup-steps"
        )
    return config


def _check_torch(config: RunConfig) -> None:
    """What the torch engine cannot mean (bench/plan/config_torch.py), one line each."""
    config_torch.check_torch_train(config.train)
    config_torch.check_torch_data(config.data)
    config_torch.check_torch_checkpoint(config.checkpoint)
    config_torch.check_torch_model(config.model)
    config_torch.check_torch_measure(config.measure)


def _lengths_known_without_platform(config: RunConfig) -> tuple[int, int, str] | None:
    """(warm-up, run, unit) when the flags alone fix both, so the check needs no TensorFlow."""
    t, steps_per_epoch = config.train, config.data.steps_per_epoch
    if t.warmup_steps is None and t.train_steps is None and t.epochs is not None:
        return 1, t.epochs, "epoch"  # the default warm-up is one epoch
    warmup = t.warmup_steps if t.warmup_steps is not None else steps_per_epoch
    total = t.train_steps
    if total is None and t.epochs is not None and steps_per_epoch is not None:
        total = t.epochs * steps_per_epoch
    if warmup is None or total is None:
        return None
    return warmup, total, "step"

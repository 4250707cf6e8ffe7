"""What a config means under the JAX engine: tf.distribute's settings that mean nothing to JAX are refused
in one line each, with what JAX does instead. No TensorFlow, no JAX (bench/config.py calls these).
"""
from __future__ import annotations

# The engines: TensorFlow (tf.distribute, bench/train/) and JAX (bench/train_jax/).
FRAMEWORKS = ("tensorflow", "jax")
# Under JAX every device it sees trains data-parallel; several processes (a Slurm step, `podbench
# launch`, TF_CONFIG) are one run under multi_worker.
JAX_STRATEGIES = ("auto", "multi_worker")


def check_jax_runtime(runtime) -> None:
    """tf.distribute's settings that mean nothing to JAX: one line each, with what JAX does instead.

    Raises:
      ValueError: a strategy other than auto or multi_worker, or --tpu.
    """
    if runtime.strategy not in JAX_STRATEGIES:
        raise ValueError(f"--strategy {runtime.strategy} is tf.distribute's: under --framework jax every device JAX "
                         "sees trains data-parallel (--replicas N for fewer); drop --strategy, or give "
                         "--strategy multi_worker for a cluster of processes (a Slurm step, podbench launch)")
    if runtime.tpu is not None:
        raise ValueError("--tpu names a TPU for TensorFlow's client: JAX on a TPU VM finds its chips itself "
                         "(and a slice's other hosts through jax.distributed); drop --tpu")


def check_jax_train(train) -> None:
    """Training settings the JAX engine has no meaning for, in one line each.

    Raises:
      ValueError: --xla/--no-xla (JAX always compiles with XLA) or mixed_float16 (it needs loss scaling).
    """
    if train.xla is not None:
        raise ValueError(f"--{'' if train.xla else 'no-'}xla: JAX always compiles the step with XLA; drop it")
    if train.precision == "mixed_float16":
        raise ValueError("--precision mixed_float16 needs loss scaling, which the JAX engine does not do: use "
                         "mixed_bfloat16 (its GPU and TPU default) or float32")

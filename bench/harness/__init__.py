"""The harness's side of a training process: what every engine shares and no framework touches.

The training process's life (``child``) and its guard (``guard``: it ends the process
when its supervisor is gone), the end recorded for a process that could not (``ending``),
the stop request (``stopping``), the CPU thread pins (``threads``) and the summary
computed from a run's raw files (``summary``) are the same whether TensorFlow
(bench/train/) or JAX (bench/train_jax/) trains. Nothing here imports a
framework; tests/test_import_rules.py checks it.
"""

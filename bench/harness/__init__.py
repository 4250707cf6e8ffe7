"""The harness's side of a training process: what every engine shares and no framework touches.

The stop request (``stopping``), the CPU thread pins (``threads``) and the summary
computed from a run's raw files (``summary``) are the same whether TensorFlow
(bench/train/) or JAX (bench/train_jax/) trains. Nothing here imports a
framework; tests/test_import_rules.py checks it.
"""

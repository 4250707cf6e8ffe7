"""The JAX engine: one JAX process (Flax, optax, orbax): devices and the cluster, the recipe and its
sharded steps, data, checkpoints, the peak probe, the environment, the training loop, the run itself.

No module here names TensorFlow at import time: the engine runs where it is not installed (real data
alone reads bench/data/pipeline.py's tf.data). What both engines share is in bench/harness/. This
``__init__`` imports nothing.
"""

"""The torch engine: one PyTorch process on one device: the device, the recipe and its step (eager or through
torch.compile), data, checkpoints, the peak probe, the environment, the run itself. What every engine shares
is in bench/harness/.

No module here imports TensorFlow or JAX (but ``torchax_ops``, PyTorch as JAX, the path to a TPU): the engine
runs where neither is installed. This ``__init__`` imports nothing.
"""

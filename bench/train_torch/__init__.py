"""The torch engine: one PyTorch process. For now its recipe alone (``recipe``: the reference's schedule,
momentum SGD as Keras computes it, LARS as tf-models-official's, the smoothed loss with the L2 term, and one
process's train step on models/resnet_torch.py); the devices and DDP, the loop, checkpoints and the
process entry come next (issue 45).

No module here imports TensorFlow or JAX: the engine runs where neither is installed. This ``__init__``
imports nothing.
"""

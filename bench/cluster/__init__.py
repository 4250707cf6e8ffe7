"""More than one process: TF_CONFIG, the local launcher and its supervision, sweeps.

No TensorFlow: each training process is a `podbench run` child.
"""

"""What every ResNet definition here shares, with no framework: depths, widths, batch norm, padding.

models/resnet.py (Keras), models/resnet_flax.py (Flax) and models/resnet_torch.py (PyTorch) build the
same network from these numbers; each imports its own framework, this module none, so the torch
definition needs neither jax nor TensorFlow to read them.
"""
from __future__ import annotations

import math

# tfm's RESNET_SPECS (official/vision/modeling/backbones/resnet.py) with every depth
# models/resnet.py accepts: block kind and blocks per stage, the stages being 64, 128, 256
# and 512 filters wide (a bottleneck's output is 4x that).
RESNET_SPECS = {
    10: ("residual", (1, 1, 1, 1)), 18: ("residual", (2, 2, 2, 2)),
    26: ("residual", (3, 3, 3, 3)), 34: ("residual", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)), 101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)), 200: ("bottleneck", (3, 24, 36, 3)),
    270: ("bottleneck", (4, 29, 53, 4)), 350: ("bottleneck", (4, 36, 72, 4)),
    420: ("bottleneck", (4, 44, 87, 4)),
}
STAGE_FILTERS = (64, 128, 256, 512)
BOTTLENECK_EXPANSION = 4  # a bottleneck block's output is 4x its filters wide
# Batch norm as the reference trained it (tensorflow/tpu models/official/resnet/resnet_model.py:
# moving-average decay 0.9, epsilon 1e-5), and as tf-models-official's own ImageNet ResNet
# experiment sets it (official/vision/configs/image_classification.py: norm_momentum=0.9,
# norm_epsilon=1e-5). The backbone's own defaults, 0.99 and 1e-3, make the moving averages
# lag the weights for ~100 steps: at a Pod's 39 steps an epoch, early evaluations would suffer.
# Keras' and flax's momentum is the old value's weight: moving = 0.9 moving + 0.1 batch statistic.
BATCH_NORM_MOMENTUM = 0.9
BATCH_NORM_EPSILON = 1e-5
# "same": TensorFlow's padding (a strided conv's odd pixel after); "symmetric": k - 1 pixels split
# evenly (the TF1 reference's fixed_padding): the same shapes and parameters, not the same function.
PADDINGS = ("same", "symmetric")


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's "SAME" padding of one spatial side: (pixels before, pixels after).

    The output has ceil(size / stride) pixels; the padding that needs is split with the odd pixel
    after (TensorFlow's rule, which Keras' padding='same', XLA's and flax's 'SAME' follow).
    """
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2

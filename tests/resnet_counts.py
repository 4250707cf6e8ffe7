"""ResNet v1.5's pinned sizes, which every definition (Keras, Flax, torch) must report: one table for their tests."""

RESNET50_TRAINABLE, RESNET50_MOVING = 25_557_032, 53_120  # Keras: 25,610,152 in all
MACS_224 = 4_089_184_256  # models/resnet.py's count of ResNet-50 v1.5 (torchvision's "GFLOPS 4.09")
# (trainable, moving statistics) at 1000 classes, as the Keras model reports them. tfm puts a
# projection on every stage's first block, stage 2 of the basic-block depths included, so
# ResNet-18 has 4,224 more parameters than torchvision's 11,689,512.
KERAS_COUNTS = {10: (5_423_016, 5_888), 18: (11_693_736, 9_728), 26: (17_964_456, 13_568),
                34: (21_801_896, 17_152), 50: (RESNET50_TRAINABLE, RESNET50_MOVING),
                101: (44_549_160, 105_344), 152: (60_192_808, 151_424)}

"""ResNet's ImageNet preprocessing, from JPEG bytes, in-graph (for tf.data's parallel map).

Training takes a random crop covering 8-100% of the image at an aspect ratio
between 3/4 and 4/3, flips it at random and resizes it to the model's size;
evaluation takes the centre square of side size/(size+32) of the short edge
(224/256 = 0.875) and resizes it. Training crops *while decoding*
(``decode_and_crop_jpeg``), so the pixels outside the crop are never produced:
decoding is the host's largest cost per image, and the crop is usually much
smaller than the image. Evaluation decodes whole (``eval_image`` says why).
"""
from __future__ import annotations

import tensorflow as tf

# The crop sampler's parameters are bench/data/spec.py's, shared with the grain input's bench/data/jpeg.py.
from bench.data.spec import (AREA_RANGE, ASPECT_RATIO_RANGE, EVAL_CROP_PADDING, MAX_ATTEMPTS, MEAN_RGB,
                             MIN_OBJECT_COVERED, STDDEV_RGB)


def train_image(encoded: tf.Tensor, image_size: int, seed: tf.Tensor | None = None) -> tf.Tensor:
    """A random crop of a JPEG, randomly flipped, resized: float32 [size, size, 3] in 0..255.

    Args:
      encoded: scalar tf.string, the JPEG bytes.
      image_size: output side in pixels.
      seed: optional shape-[2] int tensor; with it the crop and flip are
        deterministic (stateless ops), without it they differ on every call.

    Returns:
      The augmented image, not yet normalised.
    """
    shape = tf.image.extract_jpeg_shape(encoded)
    whole_image = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])
    sampler = dict(bounding_boxes=whole_image, min_object_covered=MIN_OBJECT_COVERED,
                   aspect_ratio_range=ASPECT_RATIO_RANGE, area_range=AREA_RANGE,
                   max_attempts=MAX_ATTEMPTS, use_image_if_no_bounding_boxes=True)
    if seed is None:
        begin, size, _ = tf.image.sample_distorted_bounding_box(shape, **sampler)
    else:
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(shape, seed=seed, **sampler)
    # After MAX_ATTEMPTS misses the sampler returns the whole image; a centre
    # crop is the better fallback (the object is more likely in the middle).
    missed = tf.reduce_all(tf.equal(size[:2], shape[:2]))
    window = tf.cond(missed, lambda: _centre_window(shape, image_size),
                     lambda: tf.stack([begin[0], begin[1], size[0], size[1]]))
    image = tf.io.decode_and_crop_jpeg(encoded, window, channels=3)
    if seed is None:
        image = tf.image.random_flip_left_right(image)
    else:
        image = tf.image.stateless_random_flip_left_right(image, seed=seed + 1)
    return _resize(image, image_size)


def eval_image(encoded: tf.Tensor, image_size: int) -> tf.Tensor:
    """The centre crop of a JPEG, resized: float32 [size, size, 3] in 0..255, deterministic.

    Evaluation decodes the whole image, then crops. A crop-decode (decode_and_crop_jpeg, training's) has
    libjpeg upsample the colour of the crop's edge columns as if they were the image's own edges: up to
    24 levels off a whole decode's there. Decoded whole, the TensorFlow engine and the JAX engine's grain
    input (bench/data/jpeg.py) evaluate the same pixels; an evaluation is not timed, so its extra decode
    costs no measured figure.
    """
    window = _centre_window(tf.image.extract_jpeg_shape(encoded), image_size)
    image = tf.io.decode_jpeg(encoded, channels=3)[window[0]:window[0] + window[2], window[1]:window[1] + window[3]]
    return _resize(image, image_size)


def normalize(images: tf.Tensor) -> tf.Tensor:
    """(images - mean) / std per channel, float32; any rank ending in 3 channels, float or uint8."""
    images = tf.cast(images, tf.float32)
    return (images - tf.constant(MEAN_RGB)) / tf.constant(STDDEV_RGB)


def to_uint8(image: tf.Tensor) -> tf.Tensor:
    """0..255 floats as bytes (rounded, clipped): a quarter of float32's host-to-device traffic."""
    return tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)


def _centre_window(shape: tf.Tensor, image_size: int) -> tf.Tensor:
    """[y, x, height, width] of the centre square of side size/(size+32) of the short edge."""
    height, width = shape[0], shape[1]
    fraction = image_size / (image_size + EVAL_CROP_PADDING)
    side = tf.cast(fraction * tf.cast(tf.minimum(height, width), tf.float32), tf.int32)
    side = tf.maximum(side, 1)  # a tiny image still yields a pixel
    return tf.stack([(height - side + 1) // 2, (width - side + 1) // 2, side, side])


def _resize(image: tf.Tensor, image_size: int) -> tf.Tensor:
    # Bilinear: what the TF reference implementations train with; bicubic
    # costs the host more per image for no measured accuracy gain at 224.
    resized = tf.image.resize(image, [image_size, image_size], method="bilinear")
    return tf.reshape(resized, [image_size, image_size, 3])  # static shape for batching and TPUs

"""bench/data/preprocess.py: ResNet's train and eval preprocessing, on real JPEG bytes."""
import numpy as np
import pytest
import tensorflow as tf

from bench.data import preprocess, spec


def jpeg(pixels: np.ndarray) -> tf.Tensor:
    return tf.io.encode_jpeg(pixels.astype(np.uint8), quality=95)


def gradient(height: int, width: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([255 * y / max(1, height - 1), 255 * x / max(1, width - 1), np.full((height, width), 128)], -1)


def framed(height: int, width: int, border: int) -> np.ndarray:
    """A red centre inside a blue frame ``border`` pixels wide."""
    pixels = np.zeros((height, width, 3))
    pixels[...] = (0, 0, 255)
    pixels[border:height - border, border:width - border] = (255, 0, 0)
    return pixels


SIZES = [pytest.param(40, 30, id="tall"), pytest.param(30, 40, id="wide"), pytest.param(375, 500, id="imagenet_typical"),
         pytest.param(17, 200, id="very_wide_and_tiny"), pytest.param(8, 8, id="smaller_than_the_output")]


@pytest.mark.parametrize("height, width", SIZES)
@pytest.mark.parametrize("image_size", [32, 224])
@pytest.mark.parametrize("make", [pytest.param(preprocess.train_image, id="train"),
                                  pytest.param(preprocess.eval_image, id="eval")])
def test_shape_dtype_and_range(make, image_size, height, width):
    image = make(jpeg(gradient(height, width)), image_size)
    assert image.shape == (image_size, image_size, 3) and image.dtype == tf.float32
    assert 0.0 <= float(tf.reduce_min(image)) and float(tf.reduce_max(image)) <= 255.0


def test_grayscale_jpeg_gives_three_channels():
    gray = tf.io.encode_jpeg(tf.constant(gradient(40, 30)[..., :1], tf.uint8))
    assert preprocess.eval_image(gray, 32).shape == (32, 32, 3)


def test_eval_is_the_centre_crop():
    # 256x256 with a 12-px frame: the 224/256 centre crop (16 px off each side) is all centre
    # (4 px of margin: JPEG's chroma subsampling blurs colour edges over a few pixels).
    image = preprocess.eval_image(jpeg(framed(256, 256, 12)), 224).numpy()
    assert np.abs(image[..., 0] - 255).max() < 40 and image[..., 2].max() < 40
    # ... and a 20-px frame shows at its edges: the crop is not larger than 224/256.
    edged = preprocess.eval_image(jpeg(framed(256, 256, 20)), 224).numpy()
    assert edged[0, :, 2].mean() > 150 and edged[112, 112, 2] < 40
    np.testing.assert_array_equal(image, preprocess.eval_image(jpeg(framed(256, 256, 12)), 224).numpy())


def test_eval_crop_of_a_wide_image_is_a_square_of_the_short_edge():
    # 100 x 300: the crop is 87 x 87 in the middle, so the left and right thirds never show.
    pixels = np.zeros((100, 300, 3))
    pixels[:, :100] = (0, 255, 0)
    pixels[:, 200:] = (0, 255, 0)
    pixels[:, 100:200] = (255, 255, 255)
    image = preprocess.eval_image(jpeg(pixels), 32).numpy()
    assert image[..., 0].min() > 200  # white throughout: no green edge in the crop


def test_train_with_a_seed_is_deterministic_and_seeds_differ():
    encoded = jpeg(gradient(375, 500))
    a = preprocess.train_image(encoded, 64, seed=tf.constant([1, 2]))
    b = preprocess.train_image(encoded, 64, seed=tf.constant([1, 2]))
    c = preprocess.train_image(encoded, 64, seed=tf.constant([3, 4]))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())


def test_train_flips_for_some_seeds_only():
    # Red grows left to right; a flipped crop has it growing right to left.
    encoded = jpeg(np.stack([np.tile(np.linspace(0, 255, 200), (150, 1))] + [np.zeros((150, 200))] * 2, -1))
    directions = set()
    for s in range(16):
        image = preprocess.train_image(encoded, 32, seed=tf.constant([s, 0])).numpy()
        directions.add(bool(image[:, -1, 0].mean() > image[:, 0, 0].mean()))
    assert directions == {True, False}


def test_train_crops_vary_in_scale():
    encoded = jpeg(gradient(375, 500))
    spreads = {round(float(np.ptp(preprocess.train_image(encoded, 32, seed=tf.constant([s, 9])).numpy()[..., 1])))
               for s in range(12)}
    assert len(spreads) > 3  # crops of different areas span different ranges of the gradient


@pytest.mark.parametrize("dtype", [tf.float32, tf.uint8])
def test_normalize(dtype):
    mean = tf.cast(tf.round(tf.reshape(tf.constant(spec.MEAN_RGB), [1, 1, 3])), dtype)
    np.testing.assert_allclose(preprocess.normalize(mean).numpy(), 0, atol=0.01)
    one_std = tf.constant(spec.MEAN_RGB) + tf.constant(spec.STDDEV_RGB)
    np.testing.assert_allclose(preprocess.normalize(tf.reshape(one_std, [1, 3])).numpy(), 1, atol=1e-5)


def test_to_uint8_rounds_and_clips():
    values = tf.constant([[-3.0, 0.4, 0.6, 254.5, 300.0, 127.49]])
    assert preprocess.to_uint8(values).numpy().tolist() == [[0, 0, 1, 254, 255, 127]]


def test_works_in_a_parallel_dataset_map():
    encoded = [jpeg(gradient(h, w)) for h, w in [(40, 30), (64, 48), (375, 500)]]
    dataset = tf.data.Dataset.from_tensor_slices(tf.stack(encoded)).map(
        lambda e: preprocess.normalize(preprocess.train_image(e, 32)), num_parallel_calls=2).batch(3)
    batch = next(iter(dataset))
    assert batch.shape == (3, 32, 32, 3) and np.all(np.isfinite(batch.numpy()))

"""bench/data/jpeg.py: the grain input's preprocessing in numpy, against TensorFlow's (bench/data/preprocess.py)
on real JPEGs: evaluation pixel for pixel, training's crop sampler by its statistics."""
import math

import numpy as np
import pytest
import simplejpeg
import tensorflow as tf

from bench.data import jpeg, preprocess
from bench.data.spec import AREA_RANGE, ASPECT_RATIO_RANGE, MIN_OBJECT_COVERED
from imagenet_fixture import SIZES, jpeg_bytes

# The fixture's sizes, ImageNet's usual ones, and extremes: a sliver, a single pixel.
SHAPES = SIZES + ((375, 500), (333, 500), (500, 375), (17, 300), (1, 1))
DRAWS = 2000


def photo(height: int, width: int) -> bytes:
    """A JPEG with structure and little noise: resized at any scale it stays the same picture."""
    y, x = np.mgrid[0:height, 0:width] / max(height, width)
    pixels = np.stack([128 + 100 * np.sin(6 * x + 2 * y), 128 + 100 * np.cos(5 * y - x), 255 * x * y], -1)
    return simplejpeg.encode_jpeg(np.clip(pixels, 0, 255).astype(np.uint8), quality=95)


def tensorflow_eval(encoded: bytes, size: int) -> np.ndarray:
    return preprocess.to_uint8(preprocess.eval_image(tf.constant(encoded), size)).numpy()


# --- evaluation: TensorFlow's pixels ----------------------------------------------------------------

@pytest.mark.parametrize("size", [32, 64, 224])
@pytest.mark.parametrize("height, width", SHAPES[:-1])
def test_eval_image_is_tensorflows_decode_crop_and_resize(height, width, size):
    """The whole image decoded as tf.io.decode_jpeg decodes it, cropped and resized as preprocess.py does."""
    encoded = jpeg_bytes(height, width, seed=height * width)
    y, x, side, _ = jpeg.centre_window(height, width, size)
    decoded = tf.io.decode_jpeg(encoded, channels=3)[y:y + side, x:x + side]
    theirs = preprocess.to_uint8(preprocess._resize(decoded, size)).numpy()
    ours = jpeg.eval_image(encoded, size)
    assert ours.shape == (size, size, 3) and ours.dtype == np.uint8
    assert np.abs(ours.astype(int) - theirs).max() <= 1


def synthetic_photos() -> list[bytes]:
    """ImageNet-sized photographs (bench/data/synthetic_jpegs.py), 500x500 among them: a crop starting at 32."""
    from bench.data.example import parse_example
    from bench.data.synthetic_jpegs import example

    return [parse_example(example(0, "validation", n)[0])["image/encoded"].values[0] for n in range(12)]


@pytest.mark.parametrize("size", [32, 224])
def test_eval_image_is_the_tf_data_pipelines_within_1_in_255(size):
    """preprocess.py's evaluation image decodes whole, then crops, as jpeg.py's does: the same pixels within 1
    in 255, ImageNet-sized photographs and a crop starting on a 16-pixel boundary included (a crop-decode,
    training's, differs on the crop's edge columns: preprocess.eval_image says why evaluation does not use one)."""
    encoded = [jpeg_bytes(h, w, seed=h * w) for h, w in SHAPES[:-1]] + synthetic_photos()
    if size == 224:  # 500x500's crop starts at 32: its left edge too
        assert any(jpeg.centre_window(*jpeg.image_shape(e), size).left % 16 == 0 for e in encoded)
    for image in encoded:
        assert np.abs(jpeg.eval_image(image, size).astype(int) - tensorflow_eval(image, size)).max() <= 1


@pytest.mark.parametrize("height, width", SHAPES)
@pytest.mark.parametrize("size", [32, 224])
def test_centre_window_is_preprocess_pys(height, width, size):
    theirs = preprocess._centre_window(tf.constant([height, width, 3]), size).numpy().tolist()
    assert list(jpeg.centre_window(height, width, size)) == theirs


@pytest.mark.parametrize("window, size", [
    pytest.param((0, 0, 50, 70), 32, id="down"), pytest.param((5, 9, 13, 7), 32, id="up"),
    pytest.param((3, 4, 32, 32), 32, id="same_size"), pytest.param((0, 0, 1, 1), 8, id="one_pixel"),
    pytest.param((10, 20, 40, 40), 224, id="up_to_224")])
def test_resize_window_is_tensorflows_crop_and_resize(window, size):
    image = np.random.default_rng(3).integers(0, 256, (60, 80, 3), dtype=np.uint8)
    y, x, h, w = window
    theirs = preprocess.to_uint8(preprocess._resize(tf.constant(image[y:y + h, x:x + w]), size)).numpy()
    assert np.abs(jpeg.resize_window(image, jpeg.Window(*window), size).astype(int) - theirs).max() <= 1


# --- training: the crop sampler, the flip, the scaled decode -------------------------------------------

@pytest.fixture(scope="module")
def tensorflow_windows():
    """DRAWS of tf.image.stateless_sample_distorted_bounding_box with preprocess.py's parameters, 375x500."""
    @tf.function
    def draw(seed):
        begin, size, _ = tf.image.stateless_sample_distorted_bounding_box(
            [375, 500, 3], tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=seed, min_object_covered=MIN_OBJECT_COVERED,
            aspect_ratio_range=ASPECT_RATIO_RANGE, area_range=AREA_RANGE, max_attempts=preprocess.MAX_ATTEMPTS,
            use_image_if_no_bounding_boxes=True)
        return tf.concat([begin[:2], size[:2]], 0)

    seeds = tf.stack([tf.range(DRAWS), tf.zeros(DRAWS, tf.int32)], 1)
    return tf.map_fn(draw, seeds, fn_output_signature=tf.int32).numpy()


@pytest.fixture(scope="module")
def our_windows():
    rng = np.random.default_rng(0)
    return np.array([list(jpeg.sample_window(375, 500, 224, rng)) for _ in range(DRAWS)])


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest gap between the empirical CDFs."""
    grid = np.union1d(a, b)
    cdf = lambda v: np.searchsorted(np.sort(v), grid, side="right") / len(v)  # noqa: E731
    return float(np.abs(cdf(a) - cdf(b)).max())


def test_the_sampler_draws_tensorflows_distribution(our_windows, tensorflow_windows):
    """Heights, widths, areas and corners as TensorFlow draws them (KS distance under 0.06: at 2,000 draws each,
    5% of identical distributions exceed 0.043; ours measured 0.014-0.030, while torchvision's sampler, uniform in
    area and log-uniform in aspect, is 0.05-0.10 from TensorFlow's on the same four)."""
    whole = tensorflow_windows[:, 2] * tensorflow_windows[:, 3] == 375 * 500
    theirs = tensorflow_windows[~whole]  # misses: preprocess.py takes the centre window instead
    centre = list(jpeg.centre_window(375, 500, 224))
    ours = our_windows[~np.all(our_windows == centre, axis=1)]
    assert abs(len(ours) - len(theirs)) < 0.02 * DRAWS  # as many misses
    for column in range(4):
        assert ks_distance(ours[:, column], theirs[:, column]) < 0.06, column
    assert ks_distance(ours[:, 2] * ours[:, 3], theirs[:, 2] * theirs[:, 3]) < 0.06


def test_sampled_crops_keep_to_the_ranges(our_windows):
    centre = list(jpeg.centre_window(375, 500, 224))
    crops = our_windows[~np.all(our_windows == centre, axis=1)]
    top, left, height, width = crops.T
    area = height * width / (375 * 500)
    assert area.min() >= max(AREA_RANGE[0], MIN_OBJECT_COVERED) and area.max() <= AREA_RANGE[1]
    aspect = width / height  # rounded to whole pixels: half a pixel either way
    assert np.all(aspect >= ASPECT_RATIO_RANGE[0] - 0.5 / height) and np.all(aspect <= ASPECT_RATIO_RANGE[1] + 0.5 / height)
    assert np.all(top + height <= 375) and np.all(left + width <= 500) and top.min() >= 0 and left.min() >= 0


def test_a_sliver_always_falls_back_to_the_centre():
    """No crop of 3/4..4/3 covers 8% of a 17x300 image: every attempt misses."""
    rng = np.random.default_rng(0)
    assert {jpeg.sample_window(17, 300, 32, rng) for _ in range(50)} == {jpeg.centre_window(17, 300, 32)}


def test_half_the_images_are_flipped():
    rng = np.random.default_rng(1)
    flips = sum(jpeg.train_crop(375, 500, 224, rng)[1] for _ in range(DRAWS))
    assert abs(flips / DRAWS - 0.5) < 3 * math.sqrt(0.25 / DRAWS)


def test_the_same_generator_gives_the_same_image():
    encoded = jpeg_bytes(375, 500, seed=1)
    first = jpeg.train_image(encoded, 64, np.random.default_rng(7))
    assert np.array_equal(first, jpeg.train_image(encoded, 64, np.random.default_rng(7)))
    assert not np.array_equal(first, jpeg.train_image(encoded, 64, np.random.default_rng(8)))


def test_train_image_is_its_crop_flipped_and_resized():
    encoded = photo(375, 500)
    for seed in range(20):
        window, flip = jpeg.train_crop(375, 500, 64, np.random.default_rng(seed))
        expected = jpeg.resize_window(simplejpeg.decode_jpeg(encoded, **jpeg.DECODE), window, 64)
        got = jpeg.train_image(encoded, 64, np.random.default_rng(seed))
        got = got[:, ::-1] if flip else got
        # The decode was scaled: the same picture, not the same pixels.
        assert np.abs(got.astype(int) - expected).mean() < 3, seed


@pytest.mark.parametrize("size", [32, 64, 224])
def test_the_decode_is_scaled_as_far_as_the_crop_allows(size):
    """The smallest of libjpeg's M/8 scales that keeps the crop at least ``size`` a side, and the window mapped."""
    encoded = photo(375, 500)
    rng = np.random.default_rng(size)
    for _ in range(30):
        window = jpeg.sample_window(375, 500, size, rng)
        image, scaled = jpeg.decode_scaled(encoded, window, size)
        eighths = round(image.shape[0] / 375 * 8)
        assert image.shape[:2] == (math.ceil(375 * eighths / 8), math.ceil(500 * eighths / 8))
        assert scaled == jpeg.Window(*(v * eighths / 8 for v in window))
        if eighths < 8:
            assert min(scaled.height, scaled.width) >= size
        if eighths > 1:  # one eighth less would have left the crop too small
            assert min(window.height, window.width) * (eighths - 1) / 8 < size


def test_a_crop_smaller_than_the_output_decodes_at_full_scale():
    image, scaled = jpeg.decode_scaled(photo(40, 30), jpeg.Window(5, 5, 20, 20), 224)
    assert image.shape == (40, 30, 3) and scaled == jpeg.Window(5, 5, 20, 20)


@pytest.mark.parametrize("payload", [pytest.param(b"", id="empty"), pytest.param(b"\xff\xd8\xff" + bytes(400), id="zeros"),
                                     pytest.param(b"not a jpeg", id="text")])
def test_what_is_not_a_jpeg_is_a_value_error(payload):
    with pytest.raises(ValueError):
        jpeg.eval_image(payload, 32)
    with pytest.raises(ValueError):
        jpeg.train_image(payload, 32, np.random.default_rng(0))


def test_resizing_in_many_threads_at_once_is_resizing_one_at_a_time():
    """grain decodes in several threads, and each resizes in scratch arrays of its own, never returned."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    images = [rng.integers(0, 256, (60, 80, 3), dtype=np.uint8) for _ in range(32)]
    windows = [jpeg.Window(n % 7, n % 11, 40 + n % 9, 50 - n % 13) for n in range(32)]
    alone = [jpeg.resize_window(image, window, 32) for image, window in zip(images, windows)]
    first = alone[0].copy()
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(jpeg.resize_window, images, windows, [32] * 32))
    assert all(np.array_equal(a, b) for a, b in zip(alone, together))
    assert np.array_equal(alone[0], first)  # later resizes did not write into an earlier result

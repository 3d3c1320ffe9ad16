import numpy as np
import pytest
from rlf_plugin_mario.preprocess import LUMA, FramePipeline, area_taps, area_weights, nearest_indices

RNG = np.random.default_rng(0)


def bgrx(rgb):
    """nes-py's in-memory layout of an RGB frame."""
    out = np.zeros((*rgb.shape[:2], 4), dtype=np.uint8)
    out[..., :3] = rgb[..., ::-1]
    return out


def test_area_weights_average_the_covered_pixels():
    weights = area_weights(240, 84)
    assert weights.shape == (84, 240)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(area_weights(6, 3), [[.5, .5, 0, 0, 0, 0], [0, 0, .5, .5, 0, 0], [0, 0, 0, 0, .5, .5]])
    np.testing.assert_allclose(area_weights(3, 2), [[2 / 3, 1 / 3, 0], [0, 1 / 3, 2 / 3]], rtol=1e-6)
    index, weight = area_taps(256, 84)
    assert index.shape[0] <= 5 and np.allclose(weight.sum(axis=0), 1.0)
    with pytest.raises(ValueError):
        area_weights(10, 20)


def test_gray_area_matches_the_dense_reference():
    rgb = RNG.integers(0, 256, (240, 256, 3), dtype=np.uint8)
    pipeline = FramePipeline(240, 256, 4, (2, 1, 0))
    out = pipeline(bgrx(rgb), np.empty(pipeline.out_shape, dtype=np.uint8))
    gray = rgb.astype(np.float64) @ np.array(LUMA)
    reference = area_weights(240, 84).astype(np.float64) @ gray @ area_weights(256, 84).T.astype(np.float64)
    assert out.shape == (1, 84, 84) and out.dtype == np.uint8
    assert np.abs(out[0].astype(np.int16) - np.floor(reference + 0.5)).max() <= 1


def test_layouts_agree_and_pure_colours_map_to_luma():
    rgb = np.zeros((240, 256, 3), dtype=np.uint8)
    rgb[:120, :, 0] = 255   # red top half
    rgb[120:, :, 2] = 255   # blue bottom half
    for layout, pixels in (((2, 1, 0), bgrx(rgb)), ((0, 1, 2), rgb)):
        pipeline = FramePipeline(240, 256, pixels.shape[2], layout)
        out = pipeline(pixels, np.empty(pipeline.out_shape, dtype=np.uint8))[0]
        assert out[0, 0] == round(0.299 * 255) and out[-1, -1] == round(0.114 * 255)


def test_rgb_nearest_and_native_sizes():
    rgb = RNG.integers(0, 256, (240, 256, 3), dtype=np.uint8)
    colour = FramePipeline(240, 256, 4, (2, 1, 0), grayscale=False)
    out = colour(bgrx(rgb), np.empty(colour.out_shape, dtype=np.uint8))
    assert out.shape == (3, 84, 84)
    flat = np.full((240, 256, 3), (200, 100, 50), dtype=np.uint8)
    assert tuple(colour(bgrx(flat), out)[:, 40, 40]) == (200, 100, 50)

    nearest = FramePipeline(240, 256, 4, (2, 1, 0), grayscale=False, interpolation="nearest")
    rows, cols = nearest_indices(240, 84), nearest_indices(256, 84)
    got = nearest(bgrx(rgb), np.empty((3, 84, 84), dtype=np.uint8))
    np.testing.assert_array_equal(got, rgb[rows][:, cols].transpose(2, 0, 1))

    native = FramePipeline(240, 256, 4, (2, 1, 0), resize=0)
    assert native.out_shape == (1, 240, 256)
    gray = native(bgrx(rgb), np.empty(native.out_shape, dtype=np.uint8))[0]
    expected = np.floor(rgb.astype(np.float64) @ np.array(LUMA) + 0.5)
    assert np.abs(gray - expected).max() <= 1  # float32 rounding at exact halves

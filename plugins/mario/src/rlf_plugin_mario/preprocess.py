"""Frame preprocessing in plain numpy: luminance, area or nearest resize, channel-first uint8.

No BLAS matrix products: OpenBLAS threads a (84x240)@(240x256) product, and on a loaded machine
(or next to other env workers) its threads wait on each other for milliseconds. Area resizing is done
instead as a few weighted row/column gathers ("taps": each output pixel covers at most 4 input
pixels per axis at 240x256 -> 84x84), which numpy runs single-threaded in ~0.1 ms. Luminance is one
(H, W, C) @ (C,) product per frame (~60 us); nearest resizing gathers first and costs ~15 us in all.
The emulator needs ~1.3 ms per frame, so with 4 frames per agent step this is a few percent.

Why not OpenCV: measured against ``cv2.cvtColor(BGRA2GRAY)`` + ``cv2.resize(INTER_AREA)`` (opencv-python-headless
5.0, one thread, 2026-12-02, /tmp scratch script on 50 tiled 240x256 frames), cv2 stays within one grey
level of this module and takes ~165 us per frame against ~250 us here at 42x42 (~185 vs ~270 at 84x84),
on a loaded core. That is ~85 us of an agent step whose four emulated frames take ~5 ms (under 2 %),
for a ~35 MB wheel in every Mario install and image; this module stays until the emulator is faster.

Pixels come in as (H, W, C) uint8 with the red, green and blue channels at ``rgb_index``: nes-py's
own buffer is BGRx (C=4, rgb_index=(2, 1, 0)), which this module reads without the slow copy of the
negatively strided RGB view nes-py exposes.
"""

from __future__ import annotations

import numpy as np

LUMA = (0.299, 0.587, 0.114)
"""ITU-R BT.601 luma weights of red, green and blue (what cv2's RGB2GRAY and Pillow's "L" use)."""


def area_weights(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) float32: output i averages the input interval [i*s, (i+1)*s), s = n_in / n_out,
    each input pixel weighted by how much of it the interval covers (rows sum to 1)."""
    if n_out > n_in:
        raise ValueError(f"area resize only shrinks ({n_in} -> {n_out})")
    scale = n_in / n_out
    edges = np.arange(n_out + 1, dtype=np.float64) * scale
    pixel = np.arange(n_in, dtype=np.float64)[None, :]
    covered = np.minimum(edges[1:, None], pixel + 1) - np.maximum(edges[:-1, None], pixel)
    return (np.clip(covered, 0.0, None) / scale).astype(np.float32)


def area_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """``area_weights`` as K (index, weight) taps per output pixel: (K, n_out) intp and float32."""
    dense = area_weights(n_in, n_out).astype(np.float64)
    dense[dense < 1e-6] = 0.0  # float slivers at exact pixel boundaries
    dense /= dense.sum(axis=1, keepdims=True)
    rows = [np.flatnonzero(row) for row in dense]
    taps = max(len(r) for r in rows)
    index = np.zeros((taps, n_out), dtype=np.intp)
    weight = np.zeros((taps, n_out), dtype=np.float32)
    for i, cols in enumerate(rows):
        index[:, i] = cols[-1]  # padding taps read the last pixel with weight 0
        index[: len(cols), i] = cols
        weight[: len(cols), i] = dense[i, cols]
    return index, weight


class AreaResize:
    """Area (box-filter) resize of a float32 (H, W) plane to (h, w) by separable taps."""

    def __init__(self, height: int, width: int, out_height: int, out_width: int):
        self.rows, row_w = area_taps(height, out_height)
        self.cols, col_w = area_taps(width, out_width)
        self.row_w = row_w[:, :, None].copy()  # broadcast over columns
        self.col_w = col_w
        self._v = np.empty((out_height, width), dtype=np.float32)
        self._v_tap = np.empty_like(self._v)
        self._h = np.empty((out_height, out_width), dtype=np.float32)
        self._h_tap = np.empty_like(self._h)

    def __call__(self, plane: np.ndarray) -> np.ndarray:
        """The resized plane (a buffer reused by the next call)."""
        v, v_tap, h, h_tap = self._v, self._v_tap, self._h, self._h_tap
        np.take(plane, self.rows[0], axis=0, out=v)
        np.multiply(v, self.row_w[0], out=v)
        for k in range(1, len(self.rows)):
            np.take(plane, self.rows[k], axis=0, out=v_tap)
            np.multiply(v_tap, self.row_w[k], out=v_tap)
            np.add(v, v_tap, out=v)
        np.take(v, self.cols[0], axis=1, out=h)
        np.multiply(h, self.col_w[0], out=h)
        for k in range(1, len(self.cols)):
            np.take(v, self.cols[k], axis=1, out=h_tap)
            np.multiply(h_tap, self.col_w[k], out=h_tap)
            np.add(h, h_tap, out=h)
        return h


def nearest_indices(n_in: int, n_out: int) -> np.ndarray:
    """The input pixel under the centre of each output pixel."""
    return np.minimum(((np.arange(n_out) + 0.5) * (n_in / n_out)).astype(np.intp), n_in - 1)


class FramePipeline:
    """Turns one (H, W, C) frame into (1 or 3, size, size) uint8, written into a caller's buffer."""

    def __init__(self, height: int, width: int, channels: int, rgb_index: tuple[int, int, int],
                 grayscale: bool = True, resize: int = 84, interpolation: str = "area"):
        if interpolation not in ("area", "nearest"):
            raise ValueError(f"unknown interpolation {interpolation!r}")
        self.grayscale = grayscale
        self.rgb_index = tuple(rgb_index)
        self.mode = "none" if resize == 0 else interpolation
        out_h, out_w = (height, width) if resize == 0 else (resize, resize)
        self.out_shape = (1 if grayscale else 3, out_h, out_w)
        luma = np.zeros(channels, dtype=np.float32)
        luma[list(self.rgb_index)] = LUMA
        self._luma = luma
        if self.mode == "area":
            self._area = AreaResize(height, width, out_h, out_w)
        elif self.mode == "nearest":
            self._rows = nearest_indices(height, out_h)
            self._cols = nearest_indices(width, out_w)

    def __call__(self, pixels: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Process ``pixels`` into ``out`` (shape ``out_shape``, uint8) and return ``out``."""
        if self.mode == "nearest":
            pixels = pixels[self._rows][:, self._cols]
        if self.grayscale:
            self._finish(pixels @ self._luma, out[0])
            return out
        for k, channel in enumerate(self.rgb_index):
            plane = pixels[:, :, channel]
            if self.mode == "area":
                self._finish(plane.astype(np.float32), out[k])
            else:
                out[k] = plane
        return out

    def _finish(self, plane: np.ndarray, out: np.ndarray) -> None:
        if self.mode == "area":
            plane = self._area(plane)
        plane += 0.5  # round half up; weights sum to 1 so values stay below 256
        np.copyto(out, plane, casting="unsafe")

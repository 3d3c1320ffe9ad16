"""A running mean and standard deviation that stays finite however long training runs.

Accumulating a sum of squares (or a float32 mean) overflows or loses all precision after enough
large returns; this keeps the count, mean and sum of squared deviations (M2) in float64 and merges
each batch with the parallel-variance formula (Chan et al.), whose terms stay on the scale of the
data. Pure numpy: plugins with or without torch can use it, and a caller may hand it a buffer in
shared memory so that several processes see one set of statistics (they must then hold a lock
around ``update``).

With a ``window`` the statistics forget: the count stops at ``window`` samples, so each new batch
weighs its share of the window and older data fades exponentially (an exponential moving mean and
variance, exact until the window first fills). The merge is the same formula with the old count capped.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlf.interfaces import StateTree


class RunningNormalizer:
    """Standardises values of a fixed ``shape`` with statistics of everything it has been shown.

    ``clip`` bounds the normalised output (None: no bound); ``min_std`` keeps a constant stream from
    dividing by zero. Before any update the mean is 0 and the std 1, so ``normalize`` is the identity
    (clipped). ``window`` (None: remember everything) makes the statistics those of about the last
    ``window`` samples.
    """

    def __init__(self, shape: Sequence[int] = (), *, clip: float | None = 10.0, min_std: float = 1e-4,
                 buffer: np.ndarray | None = None, window: int | None = None):
        if clip is not None and not clip > 0:
            raise ValueError(f"clip must be positive or None, got {clip!r}")
        if not min_std > 0:
            raise ValueError(f"min_std must be positive, got {min_std!r}")
        if window is not None and not (isinstance(window, int) and window > 0):
            raise ValueError(f"window must be a positive number of samples or None, got {window!r}")
        self.shape = tuple(int(s) for s in shape)
        self.clip = clip
        self.min_std = float(min_std)
        self.window = window
        size = int(np.prod(self.shape, dtype=np.int64))
        if buffer is None:
            buffer = np.zeros(self.buffer_size(self.shape), dtype=np.float64)
        elif buffer.dtype != np.float64 or buffer.shape != (self.buffer_size(self.shape),):
            raise ValueError(f"buffer must be float64 of shape ({self.buffer_size(self.shape)},), "
                             f"got {buffer.dtype} {buffer.shape}")
        self.buffer = buffer
        # Views into the one buffer, so statistics placed in shared memory are shared as a whole.
        self._count = buffer[0:1]
        self._mean = buffer[1:1 + size].reshape(self.shape)
        self._m2 = buffer[1 + size:].reshape(self.shape)

    @staticmethod
    def buffer_size(shape: Sequence[int] = ()) -> int:
        """Length of the float64 buffer holding the statistics of values of ``shape``."""
        return 1 + 2 * int(np.prod(tuple(shape), dtype=np.int64))

    @property
    def count(self) -> float:
        return float(self._count[0])

    @property
    def mean(self) -> np.ndarray:
        return self._mean.copy()

    @property
    def var(self) -> np.ndarray:
        if self.count == 0:
            return np.ones(self.shape)
        return self._m2 / self.count

    @property
    def std(self) -> np.ndarray:
        return np.maximum(np.sqrt(self.var), self.min_std)

    def update(self, values: np.ndarray) -> None:
        """Fold a batch shaped (..., *shape) into the statistics."""
        batch = np.asarray(values, dtype=np.float64).reshape(-1, *self.shape)
        if batch.shape[0] == 0:
            return
        if not np.all(np.isfinite(batch)):
            raise ValueError("RunningNormalizer.update got NaN or infinite values; the data feeding it diverged")
        n_b = float(batch.shape[0])
        mean_b = batch.mean(axis=0)
        m2_b = np.square(batch - mean_b).sum(axis=0)
        n_a = self.count
        if self.window is not None and n_a + n_b > self.window:
            # Forget: the old statistics keep the weight of what is left of the window (none when the
            # batch alone fills it); M2 shrinks with the count so the old variance itself is kept.
            kept = max(float(self.window) - n_b, 0.0)
            self._m2 *= kept / n_a if n_a else 0.0
            n_a = kept
        total = n_a + n_b
        delta = mean_b - self._mean
        # Weights below 1 keep every term on the data's scale: no n_a * n_b product, no sum of squares.
        self._mean += delta * (n_b / total)
        self._m2 += m2_b + np.square(delta) * (n_a / total) * n_b
        self._count[0] = total

    def normalize(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        out = (values - self._mean) / self.std
        if self.clip is not None:
            out = np.clip(out, -self.clip, self.clip)
        return out.astype(_float_dtype(values), copy=False)

    def denormalize(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        return (values * self.std + self._mean).astype(_float_dtype(values), copy=False)

    def state_dict(self) -> StateTree:
        return {"count": self.count, "mean": self.mean, "m2": self._m2.copy()}

    def load_state_dict(self, state: StateTree) -> None:
        mean = np.asarray(state["mean"], dtype=np.float64)
        m2 = np.asarray(state["m2"], dtype=np.float64)
        # Compared by size: a scalar's statistics may come back from storage as shape (1,).
        if mean.size != self._mean.size or m2.size != self._m2.size:
            raise ValueError(f"normalizer state has shape {mean.shape}, this normalizer expects {self.shape}")
        # In place: the buffer may be shared with other processes.
        self._count[0] = float(state["count"])
        self._mean[...] = mean.reshape(self.shape)
        self._m2[...] = m2.reshape(self.shape)


def _float_dtype(values: np.ndarray) -> np.dtype:
    return values.dtype if np.issubdtype(values.dtype, np.floating) else np.dtype(np.float64)

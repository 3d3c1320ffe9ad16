"""Python's and numpy's global random generators: seeded from the run's seed and saved in every
checkpoint, so plugin or library code that draws from them repeats with the seed and after a resume.
(Torch's generator belongs to the plugins that use torch: ``rlf.nn.torch_utils``.)
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np


def rng_state() -> dict[str, Any]:
    version, keys, pos, has_gauss, cached = np.random.get_state()
    return {"python": random.getstate(),
            "numpy": {"version": version, "keys": keys, "pos": pos, "has_gauss": has_gauss, "cached": cached}}


def seed_global_rngs(seed: int) -> None:
    """Python's and numpy's global generators, from the run's seed at the start of a new run: code that
    draws from them (a plugin, a library) repeats with the seed, and checkpoints hold the same state."""
    random.seed(seed)
    np.random.seed(seed % 2**32)


def set_rng_state(state: dict[str, Any]) -> None:
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    n = state["numpy"]
    np.random.set_state((n["version"], n["keys"], int(n["pos"]), int(n["has_gauss"]), float(n["cached"])))

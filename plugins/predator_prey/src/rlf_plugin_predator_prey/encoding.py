"""Observation layout per mode, and the encoder tabular and neural learners use.

Every observation is a fixed-length vector of small integers stored as float32, so a neural learner
feeds it as is and a tabular learner hashes it (``ObservationEncoder.hashable``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import PredatorPreyConfig

FREE, BLOCKED, TEAMMATE, OPPONENT = 0, 1, 2, 3
"""Cell codes of the local view: free, obstacle or outside the grid, a teammate, an opponent."""


@dataclass(frozen=True)
class ObservationEncoder:
    """Turns one agent's observation into a float32 vector (``vector``) or a tuple of ints (``hashable``).

    ``fields`` names each position of the vector (e.g. ``"opp0_dx"``); ``low``/``high`` bound them.
    """

    state_dim: int
    fields: tuple[str, ...] = ()
    low: tuple[int, ...] = ()
    high: tuple[int, ...] = ()

    def _checked(self, obs) -> np.ndarray:
        array = np.asarray(obs, dtype=np.float32)
        if array.ndim != 1 or array.shape[0] != self.state_dim:
            raise ValueError(f"observation has shape {array.shape}, expected ({self.state_dim},): "
                             "it does not come from this predator-prey configuration")
        return array

    def vector(self, obs) -> np.ndarray:
        """The observation as a float32 vector of length ``state_dim``; ValueError on another length."""
        return self._checked(obs)

    def hashable(self, obs) -> tuple[int, ...]:
        """The observation as a tuple of ints, a dictionary key for tabular learners."""
        return tuple(self._checked(obs).astype(np.int64).tolist())

    def hashable_batch(self, batch) -> list[tuple[int, ...]]:
        """``hashable`` for each row of an (N, state_dim) batch."""
        array = np.asarray(batch, dtype=np.float32)
        if array.ndim != 2 or array.shape[1] != self.state_dim:
            raise ValueError(f"batch has shape {array.shape}, expected (N, {self.state_dim})")
        if self.state_dim <= 4:  # tabular learners call this every env step: short rows convert cheaper in Python
            return [tuple(map(int, row)) for row in array.tolist()]  # int() truncates as astype does
        return [tuple(row) for row in array.astype(np.int64).tolist()]


def layout(config: PredatorPreyConfig) -> ObservationEncoder:
    """The observation schema of ``config``: field names and integer bounds, in vector order."""
    fields: list[str] = []
    low: list[int] = []
    high: list[int] = []

    def add(name: str, lo: int, hi: int) -> None:
        fields.append(name)
        low.append(lo)
        high.append(hi)

    if config.observation == "local":
        r = config.view_radius
        for row in range(2 * r + 1):
            for col in range(2 * r + 1):
                add(f"view[{r - row:+d},{col - r:+d}]", FREE, OPPONENT)  # [dy, dx], top row first
    if config.obs_position:
        add("x", 0, config.size - 1)
        add("y", 0, config.size - 1)
    clip = config.clip
    for prefix, count in (("opp", config.obs_opponents), ("mate", config.obs_teammates)):
        for k in range(count):
            add(f"{prefix}{k}_dx", -clip, clip + 1)  # clip + 1 in both: no such agent (left or captured)
            add(f"{prefix}{k}_dy", -clip, clip + 1)
    if config.obs_blocked:
        for direction in ("right", "up", "left", "down"):
            add(f"blocked_{direction}", 0, 1)
    return ObservationEncoder(len(fields), tuple(fields), tuple(low), tuple(high))

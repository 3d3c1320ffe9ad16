"""``GoalCells-v0``: a small Dict-observation env that needs both of its parts, for checking that Dict
observations reach a learner whole (``rlf train dqn --env gym:rlf.envs.goal_cells:GoalCells-v0``).

Every step, an image shows which of ``cells`` horizontal bands is lit (the goal) and a one-hot vector
shows an offset; the rewarded action is ``(goal + offset) % cells``. Either part alone leaves the
other uniform, so it is worth ``1 / cells`` per step, as random play; both together are worth 1. An
episode is ``length`` steps (a true terminal at the end), so returns range over 0..length.

Registered in Gymnasium's registry when this module is imported; ``gym:<module>:<id>`` imports the
module first, as ``gymnasium.make("module:id")`` does, in worker processes too.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from rlf.envs.state import generator_from_state, generator_state

ENV_ID = "GoalCells-v0"


class GoalCells(gymnasium.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, cells: int = 4, size: int = 16, length: int = 4, render_mode: str | None = None):
        if cells < 2 or size < cells or length < 1:
            raise ValueError(f"GoalCells needs cells >= 2, size >= cells and length >= 1, got cells={cells}, "
                             f"size={size}, length={length}")
        self.cells, self.size, self.length = int(cells), int(size), int(length)
        self.render_mode = render_mode
        self.observation_space = spaces.Dict({
            "image": spaces.Box(0, 255, (self.size, self.size, 1), np.uint8),
            "vector": spaces.Box(0.0, 1.0, (self.cells,), np.float32),
        })
        self.action_space = spaces.Discrete(self.cells)
        self._goal = self._offset = self._t = 0

    def _draw(self) -> None:
        self._goal = int(self.np_random.integers(self.cells))
        self._offset = int(self.np_random.integers(self.cells))

    def _observation(self) -> dict[str, np.ndarray]:
        image = np.zeros((self.size, self.size, 1), dtype=np.uint8)
        band = self.size // self.cells
        image[self._goal * band:(self._goal + 1) * band] = 255
        vector = np.zeros(self.cells, dtype=np.float32)
        vector[self._offset] = 1.0
        return {"image": image, "vector": vector}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._draw()
        return self._observation(), {}

    def step(self, action):
        reward = float(int(action) == (self._goal + self._offset) % self.cells)
        self._t += 1
        self._draw()
        return self._observation(), reward, self._t >= self.length, False, {}

    def render(self) -> np.ndarray:
        return np.repeat(self._observation()["image"], 3, axis=2)

    # the env state protocol (rlf.envs.state): exact resume of the episodes under way
    def get_state(self) -> dict[str, Any]:
        return {"goal": self._goal, "offset": self._offset, "t": self._t,
                "rng": generator_state(getattr(self, "_np_random", None))}

    def set_state(self, state: dict[str, Any]) -> None:
        self._goal, self._offset, self._t = int(state["goal"]), int(state["offset"]), int(state["t"])
        self._np_random = generator_from_state(state["rng"])


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=GoalCells, max_episode_steps=None)

"""A sparse-reward corridor for exploration benchmarks, registered with Gymnasium.

The agent starts in cell 0 of a corridor with a wall behind it; the only reward (+1, episode ends)
is in the last cell. In every cell one action steps forward, another steps back and the rest stay
put, and which action does what changes from cell to cell (a combination lock): a policy acting at
random does a slow random walk and almost never reaches the end within the time limit, and drifting
towards one action everywhere does not help either; only learning each cell's forward action does.
Observations are one-hot cells (``observation="onehot"``), so nothing learned about one cell carries
over to another, or fixed random codes per cell (``observation="code"``), where networks generalise
between cells.

Because the start is at the wall, the cells an episode visits are exactly 0..max_position, so the
distinct cells a whole run visited are max(max_position) + 1 over its episodes; each episode reports
``max_position``, ``distinct_cells`` and ``goal`` in ``info["episode_metrics"]``.

    import benchmarks.sparse_env  # registers the id
    rlf.make("icm", "gym:rlf-bench/SparseCorridor-v0", overrides=["env.kwargs={length=40}"])
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

ENV_ID = "rlf-bench/SparseCorridor-v0"


class SparseCorridor(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, length: int = 40, actions: int = 4, max_steps: int | None = None, code_size: int = 16,
                 code_seed: int = 12345, observation: str = "onehot"):
        if length < 2 or actions < 2:
            raise ValueError("the corridor needs length >= 2 and at least the 2 moves (left, right)")
        self.length, self.max_steps = length, max_steps or 3 * length
        if observation not in ("onehot", "code"):
            raise ValueError(f"observation must be 'onehot' or 'code', got {observation!r}")
        rng = np.random.default_rng(code_seed)
        self.codes = (np.eye(length, dtype=np.float32) if observation == "onehot"
                      else rng.uniform(0.0, 1.0, (length, code_size)).astype(np.float32))
        moves = np.array([rng.permutation(actions)[:2] for _ in range(length)])
        self.forward_action, self.back_action = moves[:, 0], moves[:, 1]
        self.observation_space = spaces.Box(0.0, 1.0, (self.codes.shape[1],), dtype=np.float32)
        self.action_space = spaces.Discrete(actions)
        self.position = self.max_position = self.steps = 0

    def _obs(self) -> np.ndarray:
        return self.codes[self.position].copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.position = self.max_position = self.steps = 0
        return self._obs(), {}

    def step(self, action):
        action = int(action)
        if action == self.forward_action[self.position]:
            self.position += 1
        elif action == self.back_action[self.position]:
            self.position = max(0, self.position - 1)
        self.steps += 1
        self.max_position = max(self.max_position, self.position)
        goal = self.position == self.length - 1
        truncated = not goal and self.steps >= self.max_steps
        info: dict[str, Any] = {}
        if goal or truncated:
            info["episode_metrics"] = {"max_position": float(self.max_position),
                                       "distinct_cells": float(self.max_position + 1), "goal": float(goal)}
        return self._obs(), float(goal), goal, truncated, info


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point=SparseCorridor)


class WithoutReward(gymnasium.RewardWrapper):
    """Keeps an environment (and its episode metrics) but hides its reward: curiosity-only training."""

    def reward(self, reward: float) -> float:
        return 0.0


def build_without_reward(build_env, config, render_mode: str | None = None) -> gymnasium.Env:
    """``functools.partial(build_without_reward, registered_builder)`` is a picklable env builder."""
    env = build_env(config) if render_mode is None else build_env(config, render_mode=render_mode)
    return WithoutReward(env)

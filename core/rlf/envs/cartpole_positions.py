"""``CartPolePositions-v1``: CartPole-v1 showing only the cart's position and the pole's angle, for
checking that a policy with memory learns what a memoryless one cannot
(``rlf train ppo --env gym:rlf.envs.cartpole_positions:CartPolePositions-v1 --set algo.memory='"lstm"'``).

The dynamics, rewards, 500-step limit and 475 threshold are CartPole-v1's; the two velocities are left
out of the observation, so one observation does not say which way the pole is falling: a policy has
to infer it from the observations before (Stable-Baselines3's zoo calls the same task CartPoleNoVel-v1).

Registered in Gymnasium's registry when this module is imported; ``gym:<module>:<id>`` imports the
module first, as ``gymnasium.make("module:id")`` does, in worker processes too.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from rlf.envs.state import generator_from_state, generator_state, pack, unpack

ENV_ID = "CartPolePositions-v1"


class CartPolePositions(CartPoleEnv):
    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2], dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)

    @staticmethod
    def _positions(observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation, dtype=np.float32)[[0, 2]]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        observation, info = super().reset(seed=seed, options=options)
        return self._positions(observation), info

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        return self._positions(observation), reward, terminated, truncated, info

    # the env state protocol (rlf.envs.state): exact resume of the episodes under way
    def get_state(self) -> dict[str, Any]:
        return {"state": pack(self.state), "steps_beyond_terminated": self.steps_beyond_terminated,
                "rng": generator_state(getattr(self, "_np_random", None))}

    def set_state(self, state: dict[str, Any]) -> None:
        self.state = unpack(state["state"])
        self.steps_beyond_terminated = state["steps_beyond_terminated"]
        self._np_random = generator_from_state(state["rng"])


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=CartPolePositions, max_episode_steps=500, reward_threshold=475.0)

"""``MaskedChoice-v0``: a small env with an action mask (``rlf.masking``), for checking that agents honour
masks (``rlf train ppo --env gym:rlf.envs.masked_choice:MaskedChoice-v0``).

Each step allows ``allowed`` of ``actions`` actions, drawn afresh (the observation's ``action_mask``
part), and marks one allowed action as the goal (the ``goal`` part, one-hot). The goal pays 1, another
allowed action 0, and a forbidden action ends the episode with a penalty of -1. An episode is ``length``
steps, so returns range from -1 to ``length``: an agent that honours the mask never sees the penalty and
only has to learn the goal; one that ignores it must learn from the mask part which actions end its
episode. Uniform random play over allowed actions scores ``length / allowed``. ``mask_key`` names the
mask part: under another name (``env.kwargs={mask_key="allowed"}``) agents see the same observation but
no mask, the comparison the masking tests make.

Registered in Gymnasium's registry when this module is imported; ``gym:<module>:<id>`` imports the
module first, as ``gymnasium.make("module:id")`` does, in worker processes too.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from rlf.envs.state import generator_from_state, generator_state
from rlf.masking import ACTION_MASK_KEY

ENV_ID = "MaskedChoice-v0"
PENALTY = -1.0


class MaskedChoice(gymnasium.Env):
    def __init__(self, actions: int = 6, allowed: int = 2, length: int = 10, mask_key: str = ACTION_MASK_KEY):
        if not 1 <= allowed < actions or length < 1:
            raise ValueError("MaskedChoice needs 1 <= allowed < actions and length >= 1")
        self.actions, self.allowed, self.length, self.mask_key = actions, allowed, length, mask_key
        self.observation_space = spaces.Dict({
            mask_key: spaces.Box(0, 1, (actions,), np.int8),
            "goal": spaces.Box(0.0, 1.0, (actions,), np.float32)})
        self.action_space = spaces.Discrete(actions)
        self._mask = np.zeros(actions, dtype=np.int8)
        self._goal, self._t = 0, 0

    def _draw(self) -> None:
        chosen = self.np_random.choice(self.actions, size=self.allowed, replace=False)
        self._mask = np.zeros(self.actions, dtype=np.int8)
        self._mask[chosen] = 1
        self._goal = int(chosen[0])

    def _observation(self) -> dict[str, np.ndarray]:
        goal = np.zeros(self.actions, dtype=np.float32)
        goal[self._goal] = 1.0
        return {self.mask_key: self._mask.copy(), "goal": goal}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._draw()
        return self._observation(), {}

    def step(self, action):
        action = int(action)
        self._t += 1
        if not self._mask[action]:
            return self._observation(), PENALTY, True, False, {"forbidden": True}
        reward = float(action == self._goal)
        self._draw()
        return self._observation(), reward, self._t >= self.length, False, {}

    # the env state protocol (rlf.envs.state): exact resume of the episodes under way
    def get_state(self) -> dict[str, Any]:
        return {"mask": self._mask.copy(), "goal": self._goal, "t": self._t,
                "rng": generator_state(getattr(self, "_np_random", None))}

    def set_state(self, state: dict[str, Any]) -> None:
        self._mask = np.asarray(state["mask"], dtype=np.int8).copy()
        self._goal, self._t = int(state["goal"]), int(state["t"])
        self._np_random = generator_from_state(state["rng"])


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=MaskedChoice, max_episode_steps=None)

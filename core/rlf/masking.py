"""Action masks: which actions an environment allows in each state, read from the observation.

The convention is PettingZoo's and Gymnasium's for Dict observations: a part named ``action_mask``, a
``Box(0, 1, (n,))`` or ``MultiBinary(n)`` for a ``Discrete(n)`` action space, 1 where the action is
allowed. The mask stays part of the observation (a policy may read it like any other part); agents that
honour masks never choose an action whose entry is 0, in exploration and in greedy play, and learners
that score actions (PPO's ratio, DQN's bootstrap) score only allowed ones.

A row that allows nothing is read as allowing everything: an env that masks every action of an agent
that has no move left (PettingZoo does so for agents that are done) then still gets a valid action.

Plain numpy, so that every agent, torch or not, uses the same rule (``rlf.nn.mask_logits`` is the
torch side).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from rlf.errors import ConfigError

ACTION_MASK_KEY = "action_mask"


def has_mask(obs_space: gymnasium.Space, action_space: gymnasium.Space, owner: str = "the agent") -> bool:
    """True where ``obs_space`` carries an action mask for ``action_space``; a mask that does not fit the
    actions is a one-line ``ConfigError`` naming ``owner``."""
    if not isinstance(obs_space, gymnasium.spaces.Dict) or ACTION_MASK_KEY not in obs_space.spaces:
        return False
    mask = obs_space.spaces[ACTION_MASK_KEY]
    if not isinstance(action_space, gymnasium.spaces.Discrete):
        raise ConfigError(f"{owner}: the observation's {ACTION_MASK_KEY!r} part masks Discrete actions, but the "
                          f"action space is {action_space}; remove the part or use Discrete actions")
    if not isinstance(mask, gymnasium.spaces.Box | gymnasium.spaces.MultiBinary) or tuple(mask.shape) != (
            int(action_space.n),):
        raise ConfigError(f"{owner}: the observation's {ACTION_MASK_KEY!r} part is {mask}, but {action_space} "
                          f"needs a Box(0, 1, ({int(action_space.n)},)) or MultiBinary({int(action_space.n)}) of 1 "
                          "for allowed actions")
    return True


def action_mask(batch: Any) -> np.ndarray | None:
    """The (N, n) boolean mask of a batch of observations (True: allowed), or None where there is none.
    Rows that allow nothing allow everything."""
    if not isinstance(batch, dict) or ACTION_MASK_KEY not in batch:
        return None
    mask = np.asarray(batch[ACTION_MASK_KEY]) > 0
    mask[~mask.any(axis=1)] = True
    return mask


def masked_argmax(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Per row, the index of the largest value among the allowed actions."""
    if mask is None:
        return values.argmax(axis=1)
    return np.where(mask, values, -np.inf).argmax(axis=1)


def sample_allowed(rng: np.random.Generator, mask: np.ndarray) -> np.ndarray:
    """One uniformly drawn allowed action per row (the largest of independent uniforms over the allowed
    entries is uniform over them)."""
    return np.where(mask, rng.random(mask.shape), -1.0).argmax(axis=1)


class MaskFromInfo(gymnasium.ObservationWrapper):
    """For envs that give their mask in ``info["action_mask"]`` (Gymnasium's convention for some envs,
    e.g. Taxi-v4): the observation becomes ``{"observation": obs, "action_mask": mask}``, which every
    mask-honouring agent reads. Steps whose info has no mask allow every action.

    Use it in the env's factory (``gymnasium.make(...)`` wrapped), or register a wrapped id with
    ``gymnasium.register`` and train on ``gym:<module>:<id>``."""

    def __init__(self, env: gymnasium.Env):
        super().__init__(env)
        if not isinstance(env.action_space, gymnasium.spaces.Discrete):
            raise ConfigError(f"MaskFromInfo masks Discrete actions, but the env's action space is {env.action_space}")
        self._n = int(env.action_space.n)
        self._mask = np.ones(self._n, dtype=np.int8)
        self.observation_space = gymnasium.spaces.Dict({
            "observation": env.observation_space, ACTION_MASK_KEY: gymnasium.spaces.Box(0, 1, (self._n,), np.int8)})

    def _take(self, info: dict) -> None:
        mask = info.get(ACTION_MASK_KEY)
        self._mask = (np.ones(self._n, dtype=np.int8) if mask is None
                      else (np.asarray(mask).reshape(self._n) > 0).astype(np.int8))

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._take(info)
        return self.observation(obs), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._take(info)
        return self.observation(obs), reward, terminated, truncated, info

    def observation(self, observation):
        return {"observation": observation, ACTION_MASK_KEY: self._mask.copy()}

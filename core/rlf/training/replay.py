"""A uniform replay buffer over (obs, action, reward, next_obs, terminated) for one agent.

Arrays keep the observation dtype (uint8 images stay uint8); Dict and Tuple observations are stored as a
dict (tuple) of such arrays, one per part (``rlf.observations``). Learners own their buffers; the
off-policy strategy hands them every step's transitions. Image learners that need frame-stack
de-duplication can subclass it.
"""

from __future__ import annotations

import numpy as np

from rlf import observations
from rlf.interfaces import StateTree


class ReplayBuffer:
    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype=np.float32, action_dtype=np.int64,
                 action_shape: tuple[int, ...] = (), obs_space=None, obs_dtypes=None):
        """``action_shape`` () holds one discrete action id per transition; continuous (Box) actions
        give their shape, e.g. ``(1,)`` for Pendulum with ``action_dtype=np.float32``.

        ``obs_space`` (a gymnasium space; it replaces ``obs_shape``/``obs_dtype``) stores its observations as
        the collectors batch them, a Dict's or Tuple's parts each in its own array; ``obs_dtypes(part space)``
        picks each part's storage dtype (default: the space's own)."""
        if capacity < 1:
            raise ValueError("replay capacity must be at least 1")
        self.capacity = capacity
        if obs_space is not None:
            self.obs = observations.empty(obs_space, capacity, obs_dtypes)
            self.next_obs = observations.empty(obs_space, capacity, obs_dtypes)
        else:
            self.obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
            self.next_obs = np.zeros((capacity, *obs_shape), dtype=obs_dtype)
        self.actions = np.zeros((capacity, *action_shape), dtype=action_dtype)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminated = np.zeros(capacity, dtype=np.float32)
        self.position = 0
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, obs: np.ndarray, actions: np.ndarray, rewards: np.ndarray, next_obs: np.ndarray,
            terminated: np.ndarray) -> None:
        """Add a batch of transitions (leading axis = batch)."""
        count = len(actions)
        index = (self.position + np.arange(count)) % self.capacity
        observations.assign(self.obs, index, obs)
        observations.assign(self.next_obs, index, next_obs)
        self.actions[index] = actions
        self.rewards[index] = rewards
        self.terminated[index] = terminated
        self.position = int((self.position + count) % self.capacity)
        self.size = int(min(self.capacity, self.size + count))

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        index = rng.integers(0, self.size, size=batch_size)
        return {"obs": observations.index(self.obs, index), "actions": self.actions[index],
                "rewards": self.rewards[index], "next_obs": observations.index(self.next_obs, index),
                "terminated": self.terminated[index]}

    def state_dict(self) -> StateTree:
        n = self.size
        order = (np.arange(n) + (self.position - n)) % self.capacity  # oldest first
        return {"obs": observations.index(self.obs, order), "next_obs": observations.index(self.next_obs, order),
                "actions": self.actions[order],
                "rewards": self.rewards[order], "terminated": self.terminated[order]}

    def load_state_dict(self, state: StateTree) -> None:
        self.position = self.size = 0
        keep = slice(-self.capacity, None)
        self.add(observations.index(state["obs"], keep), state["actions"][keep], state["rewards"][keep],
                 observations.index(state["next_obs"], keep), state["terminated"][keep])

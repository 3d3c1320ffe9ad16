"""Gymnasium's vector API over env copies stepped in this process, in turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from rlf import observations


class InProcessVectorEnv(gymnasium.vector.VectorEnv):
    """Gymnasium's vector API with same-step autoreset, lean enough for envs that step in microseconds.

    Gymnasium's SyncVectorEnv merges every sub-env's info dict on every step; for CartPole that
    halves throughput. Here infos are only looked at when an episode ends.
    """

    def __init__(self, env_fns: list[Callable[[], gymnasium.Env]]):
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = gymnasium.vector.utils.batch_space(first.observation_space, self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(first.action_space, self.num_envs)
        self.metadata = {**first.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = first.render_mode
        self._obs = observations.empty(first.observation_space, self.num_envs)
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terminated = np.zeros(self.num_envs, dtype=bool)
        self._truncated = np.zeros(self.num_envs, dtype=bool)
        self.record_final_frames = False

    def reset(self, *, seed=None, options=None):
        seeds = [None] * self.num_envs if seed is None else [seed + i for i in range(self.num_envs)]
        for i, env in enumerate(self.envs):
            observations.assign(self._obs, i, env.reset(seed=seeds[i], options=options)[0])
        return observations.copy(self._obs), {}

    def step(self, actions):
        infos: dict[str, Any] = {}
        obs, rewards, terminated, truncated = self._obs, self._rewards, self._terminated, self._truncated
        for i, env in enumerate(self.envs):
            observation, rewards[i], terminated[i], truncated[i], info = env.step(actions[i])
            if terminated[i] or truncated[i]:
                if not infos:
                    infos = {"final_obs": np.full(self.num_envs, None, dtype=object),
                             "_final_obs": np.zeros(self.num_envs, dtype=bool),
                             "final_info": [None] * self.num_envs}
                infos["final_obs"][i] = observation
                infos["_final_obs"][i] = True
                infos["final_info"][i] = info
                if self.record_final_frames:  # the frame of the last step, before the reset replaces it
                    infos.setdefault("final_frame", [None] * self.num_envs)[i] = env.render()
                observation, _ = env.reset()
            observations.assign(obs, i, observation)
        return observations.copy(obs), rewards.copy(), terminated.copy(), truncated.copy(), infos

    def render(self):
        return self.envs[0].render()

    def close_extras(self, **kwargs):
        for env in self.envs:
            env.close()

"""Reward shaping for Mario as an explicit wrapper (``env.reward_shaping=true``), and the sparse rewards
(``env.extrinsic_reward=flag|none``).

    shaped = scale * (raw + score_gained / score_divisor + flag_bonus * [flag reached] - death_penalty * [died])

``raw`` is the game's reward for the step (x progress, clock, -25 on death). The flag bonus is paid
once, on the step ``flag_get`` turns on; the penalty on the step Mario dies or loses a life. The
learner sees the shaped reward (so the core's episode ``return`` is the shaped return); the episode
metrics keep ``raw_return`` from the env below and gain ``shaped_return``.
"""

from __future__ import annotations

from typing import Any

import gymnasium

from rlf import EPISODE_METRICS


class MarioRewardShaping(gymnasium.Wrapper):
    def __init__(self, env: gymnasium.Env, score_divisor: float = 40.0, flag_bonus: float = 50.0,
                 death_penalty: float = 50.0, scale: float = 0.1):
        super().__init__(env)
        if score_divisor <= 0 or scale <= 0 or flag_bonus < 0 or death_penalty < 0:
            raise ValueError("score_divisor and scale must be positive, flag_bonus and death_penalty >= 0")
        self.score_divisor = float(score_divisor)
        self.flag_bonus = float(flag_bonus)
        self.death_penalty = float(death_penalty)
        self.scale = float(scale)
        self._score = 0
        self._flag = False
        self._return = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._score = info["score"]
        self._flag = info["flag_get"]
        self._return = 0.0
        return obs, info

    def shape(self, raw: float, info: dict[str, Any]) -> float:
        """The shaped reward of one step (updates the score and flag it compares against)."""
        reward = raw + (info["score"] - self._score) / self.score_divisor
        if info["flag_get"] and not self._flag:
            reward += self.flag_bonus
        if info["died"]:
            reward -= self.death_penalty
        self._score = info["score"]
        self._flag = info["flag_get"]
        return reward * self.scale

    def step(self, action):
        obs, raw, terminated, truncated, info = self.env.step(action)
        reward = self.shape(float(raw), info)
        self._return += reward
        if EPISODE_METRICS in info:
            info[EPISODE_METRICS] = {**info[EPISODE_METRICS], "shaped_return": self._return}
        return obs, reward, terminated, truncated, info


class MarioSparseReward(gymnasium.Wrapper):
    """The sparse settings of the curiosity experiments: the learner is paid 1 on the step Mario first
    reaches the flag (``flag_only``) or nothing at all. The game's reward stays in ``raw_return`` (and
    ``x_pos_max`` in the metrics), so sparse runs are judged on the same scale as dense ones."""

    def __init__(self, env: gymnasium.Env, flag_only: bool = True):
        super().__init__(env)
        self.flag_only = flag_only
        self._flag = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._flag = bool(info["flag_get"])
        return obs, info

    def step(self, action):
        obs, _, terminated, truncated, info = self.env.step(action)
        flag = bool(info["flag_get"])
        reward = 1.0 if self.flag_only and flag and not self._flag else 0.0
        self._flag = flag
        return obs, reward, terminated, truncated, info

"""Helpers for testing PPO extensions (rlf-plugin-icm, -rnd, -knn and yours): a sparse-reward
corridor env, build contexts, hand-made rollouts and the minibatch PPO would hand an extension.

Imported by tests only; it needs torch and Gymnasium like the rest of this plugin.
"""

from __future__ import annotations

import csv
from pathlib import Path

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

import rlf
from rlf import SINGLE_AGENT, BuildContext, EnvSpec, Rollout, RunConfig

from .extension import Minibatch

CORRIDOR_ID = "rlf-test/Corridor-v0"


class Corridor(gymnasium.Env):
    """Start at cell 0 against a wall; +1 only in the last cell. Each cell has its own forward and back
    action (a combination lock) and one-hot observations, so wandering at random rarely gets far."""

    def __init__(self, length: int = 40, actions: int = 4, max_steps: int = 120, seed: int = 12345):
        rng = np.random.default_rng(seed)
        moves = np.array([rng.permutation(actions)[:2] for _ in range(length)])
        self.forward_action, self.back_action = moves[:, 0], moves[:, 1]
        self.length, self.max_steps = length, max_steps
        self.observation_space = spaces.Box(0.0, 1.0, (length,), dtype=np.float32)
        self.action_space = spaces.Discrete(actions)

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = self.furthest = self.steps = 0
        return self._obs(), {}

    def step(self, action):
        if action == self.forward_action[self.position]:
            self.position += 1
        elif action == self.back_action[self.position]:
            self.position = max(0, self.position - 1)
        self.steps += 1
        self.furthest = max(self.furthest, self.position)
        goal = self.position == self.length - 1
        truncated = not goal and self.steps >= self.max_steps
        info = {"episode_metrics": {"furthest": float(self.furthest)}} if goal or truncated else {}
        return self._obs(), float(goal), goal, truncated, info


def register_corridor() -> str:
    """Registers ``Corridor`` with Gymnasium (once) and returns its id, for ``gym:<id>`` runs."""
    if CORRIDOR_ID not in gymnasium.registry:
        gymnasium.register(id=CORRIDOR_ID, entry_point=Corridor)
    return CORRIDOR_ID


def distinct_cells(algorithm: str, run_dir: Path, steps: int, seed: int = 0) -> int:
    """Cells visited over a whole training run (episodes start at the wall, so cells 0..furthest)."""
    algo = rlf.make(algorithm, f"gym:{register_corridor()}", overrides=[
        f"steps={steps}", f"seed={seed}", "num_envs=8", "algo.lr=0.001", "progress=false",
        f"run_dir='{run_dir}'", "checkpoint_interval=0"])
    algo.train()
    with open(Path(run_dir) / "episodes.csv") as handle:
        return int(max(float(row["furthest"]) for row in csv.DictReader(handle))) + 1


def make_context(config, observation_space: spaces.Space, n_actions: int, num_envs: int, seed: int = 0,
                 algorithm: str = "ppo") -> BuildContext:
    """A BuildContext for one single-agent env of ``num_envs`` copies, as the core would hand it over."""
    spec = EnvSpec("test", (SINGLE_AGENT,), {SINGLE_AGENT: observation_space},
                   {SINGLE_AGENT: spaces.Discrete(n_actions)}, False, num_envs)
    return BuildContext(spec, config, RunConfig(algorithm=algorithm, env="test", steps=10_000), seed, "cpu")


def make_rollout(obs: np.ndarray, next_obs: np.ndarray, actions: np.ndarray, dones: np.ndarray | None = None,
                 rewards: np.ndarray | None = None, advantages: np.ndarray | None = None) -> Rollout:
    """A single-agent rollout from (T, N, ...) arrays; values and advantages are zero unless given."""
    steps, envs = actions.shape
    zeros = np.zeros((steps, envs), dtype=np.float32)
    dones = np.zeros((steps, envs), dtype=bool) if dones is None else dones

    def one(array):
        return {SINGLE_AGENT: array}

    return Rollout(one(obs), one(next_obs), one(actions), one(zeros if rewards is None else rewards),
                   one(dones.copy()), one(dones), one(np.ones((steps, envs), dtype=bool)),
                   {SINGLE_AGENT: {"log_prob": zeros, "value": zeros}}, one(zeros), one(zeros),
                   one(zeros if advantages is None else advantages), one(zeros))


def whole_batch(rollout: Rollout) -> Minibatch:
    """The whole rollout as one minibatch, the way PPO hands it over (0-based actions, flat indices)."""
    def flat(array):
        return torch.as_tensor(array.reshape(-1, *array.shape[2:]))

    actions = flat(rollout.actions[SINGLE_AGENT]).long()
    return Minibatch(SINGLE_AGENT, flat(rollout.obs[SINGLE_AGENT]), flat(rollout.next_obs[SINGLE_AGENT]), actions,
                     torch.arange(len(actions)), flat(rollout.dones[SINGLE_AGENT]))


def corridor_rollout(cells: np.ndarray, length: int = 40) -> Rollout:
    """Steps right along ``cells`` (T, N) of a one-hot corridor: obs = cell, next_obs = cell + 1, action 1."""
    eye = np.eye(length, dtype=np.float32)
    return make_rollout(eye[cells], eye[np.minimum(cells + 1, length - 1)], np.ones(cells.shape, dtype=np.int64))

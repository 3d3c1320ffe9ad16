"""Small environments for the DQN tests, registered through a test plugin object."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pydantic import Field

from rlf import EnvConfig, hookimpl


@dataclass(frozen=True)
class Encoder:
    """The shape of predator-prey's encoder, as far as DQN uses it."""

    state_dim: int


class WalkersConfig(EnvConfig):
    """Two walkers, each on its own line; reaching the right end pays +1 and ends that walker's part."""

    length: int = Field(4, ge=2, le=20, description="Cells per line.")
    max_steps: int = Field(12, ge=1, le=100, description="Truncation limit.")
    promised_dim: int = Field(1, ge=1, le=8, description="state_dim the encoder in the metadata promises.")


class Walkers(ParallelEnv):
    metadata = {"name": "walkers_v0"}

    def __init__(self, config: WalkersConfig, render_mode=None):
        self.config = config
        self.render_mode = render_mode
        self.possible_agents = ["left", "right"]
        self.agents: list[str] = []
        self.rlf_metadata = {"encoder": Encoder(config.promised_dim), "teams": {"left": "a", "right": "a"}}

    @functools.cache  # noqa: B019 - spaces are per-instance constants
    def observation_space(self, agent):
        return spaces.Box(0, self.config.length, shape=(1,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return spaces.Discrete(2)  # 0 left, 1 right

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.pos = {a: 0 for a in self.agents}
        self.t = 0
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        obs, rewards, term, trunc, infos = {}, {}, {}, {}, {}
        for a in self.agents:
            self.pos[a] = int(np.clip(self.pos[a] + (1 if actions[a] == 1 else -1), 0, self.config.length - 1))
            term[a] = self.pos[a] == self.config.length - 1
            trunc[a] = self.t >= self.config.max_steps and not term[a]
            rewards[a] = 1.0 if term[a] else 0.0
            obs[a] = np.array([self.pos[a]], np.float32)
            infos[a] = {}
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        if not self.agents:
            for a in infos:
                infos[a] = {"episode_metrics": {"both_arrived": float(all(term.values()))}}
        return obs, rewards, term, trunc, infos


class SideConfig(EnvConfig):
    """A lit square appears on the left or right of an image; pressing that side pays +1."""

    side: int = Field(40, ge=36, le=96, description="Image height and width.")
    channels_last: bool = Field(False, description="Observations (H, W, 4) instead of (4, H, W).")
    episode_steps: int = Field(10, ge=1, le=1000, description="Steps per episode (then truncated).")


class LitSide(gymnasium.Env):
    """A frame-stacked uint8 image env, small enough for CPU tests of the CNN and frame replay."""

    def __init__(self, config: SideConfig, render_mode=None):
        self.config = config
        self.render_mode = render_mode
        shape = (config.side, config.side, 4) if config.channels_last else (4, config.side, config.side)
        self.observation_space = spaces.Box(0, 255, shape=shape, dtype=np.uint8)
        self.action_space = spaces.Discrete(2)
        self.rng = np.random.default_rng(0)

    def _frame(self):
        frame = np.zeros((self.config.side, self.config.side), np.uint8)
        half = self.config.side // 2
        columns = slice(0, half) if self.lit == 0 else slice(half, None)
        frame[8:-8, columns] = 200
        return frame

    def _obs(self):
        stack = np.stack(self.frames)
        return np.moveaxis(stack, 0, -1) if self.config.channels_last else stack

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self.lit = int(self.rng.integers(2))
        self.frames = [self._frame()] * 4
        return self._obs(), {}

    def step(self, action):
        reward = 1.0 if int(action) == self.lit else 0.0
        self.t += 1
        self.lit = int(self.rng.integers(2))
        self.frames = self.frames[1:] + [self._frame()]
        return self._obs(), reward, False, self.t >= self.config.episode_steps, {}


class EnvPlugin:
    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_environments(self, register):
        register("walkers", build_env=make_walkers, config=WalkersConfig)
        register("lit-side", build_env=make_lit_side, config=SideConfig)


def make_walkers(config: WalkersConfig, render_mode=None) -> Walkers:
    return Walkers(config, render_mode)


def make_lit_side(config: SideConfig, render_mode=None) -> LitSide:
    return LitSide(config, render_mode)


@pytest.fixture(scope="session")
def registry():
    from rlf.plugins import load_registry

    return load_registry(extra_plugins=[("dqn-test-envs", EnvPlugin())])

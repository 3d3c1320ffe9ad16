"""Small environments for PPO's tests, registered through a test plugin object (not entry points)."""

from __future__ import annotations

import functools
import os

import gymnasium
import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pydantic import Field

from rlf import EnvConfig, StrategyFamily, hookimpl


class CueConfig(EnvConfig):
    """Every agent sees a random binary cue each step and is paid for answering it its own way."""

    episode_length: int = Field(10, ge=1, le=100, description="Steps until truncation.")
    leaver_steps: int = Field(3, ge=1, le=100, description="The 'leaver' agent terminates after this many steps.")


class CueEnv(ParallelEnv):
    """Three agents with identical observation spaces (a one-hot cue) and opposite optimal mappings:
    "copier" is paid for action == cue, "contrarian" for action != cue, "leaver" copies too but leaves
    the episode early (so its later steps are masked out). A shared network could not serve both
    copier and contrarian; independent networks can."""

    metadata = {"name": "cue_v0", "render_modes": []}

    def __init__(self, config: CueConfig, render_mode=None):
        self.config = config
        self.render_mode = render_mode
        self.possible_agents = ["copier", "contrarian", "leaver"]
        self.agents: list[str] = []
        self.rng = np.random.default_rng(0)

    @functools.cache  # noqa: B019 - spaces are per-instance constants
    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return spaces.Discrete(2)

    def _observe(self) -> dict[str, np.ndarray]:
        self.cues = {a: int(self.rng.integers(2)) for a in self.agents}
        return {a: np.eye(2, dtype=np.float32)[cue] for a, cue in self.cues.items()}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        rewards, terminated, truncated = {}, {}, {}
        for a in self.agents:
            correct = actions[a] == self.cues[a]
            rewards[a] = float(correct if a != "contrarian" else not correct)
            terminated[a] = a == "leaver" and self.t >= self.config.leaver_steps
            truncated[a] = self.t >= self.config.episode_length and not terminated[a]
        observations = self._observe()
        self.agents = [a for a in self.agents if not (terminated[a] or truncated[a])]
        return observations, rewards, terminated, truncated, {a: {} for a in terminated}


class ImageConfig(EnvConfig):
    """Mario-shaped observations (4 stacked 84x84 uint8 frames), three actions."""

    episode_length: int = Field(8, ge=1, le=1000, description="Steps until truncation.")


class ImageEnv(gymnasium.Env):
    """Shows a frame stack that is bright (255) or dark (0); action 1 is paid on bright frames,
    action 0 on dark ones."""

    metadata = {"render_modes": []}

    def __init__(self, config: ImageConfig, render_mode=None):
        self.config = config
        self.observation_space = spaces.Box(0, 255, shape=(4, 84, 84), dtype=np.uint8)
        self.action_space = spaces.Discrete(3)

    def _observe(self) -> np.ndarray:
        self.bright = bool(self.np_random.integers(2))
        return np.full((4, 84, 84), 255 if self.bright else 0, dtype=np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        self.t += 1
        reward = float(action == (1 if self.bright else 0))
        return self._observe(), reward, False, self.t >= self.config.episode_length, {}


class TargetConfig(EnvConfig):
    """A continuous contextual bandit: reach the point the observation shows."""

    episode_length: int = Field(8, ge=1, le=1000, description="Steps until truncation.")
    multi_discrete: bool = Field(False, description="MultiDiscrete actions instead (an action space PPO refuses).")


class TargetEnv(gymnasium.Env):
    """Observes a target in [-1, 1]^2 (a new one every step) and is paid -|action - target|^2 (0 at best;
    about -2.7 for a unit-std Gaussian around 0). Actions are a Box in [-2, 2]^2."""

    def __init__(self, config: TargetConfig, render_mode=None):
        self.config = config
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = (spaces.MultiDiscrete([3, 3]) if config.multi_discrete
                             else spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32))
        self.rng = np.random.default_rng(0)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self.target = self.rng.uniform(-1, 1, size=2).astype(np.float32)
        return self.target.copy(), {}

    def step(self, action):
        self.t += 1
        reward = -float(np.sum((np.asarray(action, dtype=np.float64) - self.target) ** 2))
        self.target = self.rng.uniform(-1, 1, size=2).astype(np.float32)
        return self.target.copy(), reward, False, self.t >= self.config.episode_length, {}

    def get_state(self):  # so a resumed run continues its episodes exactly
        from rlf import generator_state

        return {"rng": generator_state(self.rng), "t": self.t, "target": self.target.tolist()}

    def set_state(self, state):
        from rlf import generator_from_state

        self.rng, self.t = generator_from_state(state["rng"]), int(state["t"])
        self.target = np.asarray(state["target"], dtype=np.float32)


class PPOTestEnvs:
    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_environments(self, register):
        register("cue", build_env=make_cue, config=CueConfig)
        register("image", build_env=make_image, config=ImageConfig)
        register("target", build_env=TargetEnv, config=TargetConfig)


def make_cue(config: CueConfig, render_mode=None) -> CueEnv:
    return CueEnv(config, render_mode)


def make_image(config: ImageConfig, render_mode=None) -> ImageEnv:
    return ImageEnv(config, render_mode)


def register_algorithm(name, build_agent, build_learner, config):
    """A test plugin object registering one more on-policy algorithm (e.g. PPO with an extension)."""

    class Plugin:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_algorithms(self, register):
            register(name, build_agent=build_agent, build_learner=build_learner, family=StrategyFamily.ON_POLICY,
                     config=config, default_env="gym:CartPole-v1")

    return Plugin()


def ppo_only_registry(*extra_plugins):
    """This plugin, the test environments and ``extra_plugins``: other installed plugins stay out."""
    from rlf.plugins import load_registry

    previous = os.environ.get("RLF_LOAD_PLUGINS")
    os.environ["RLF_LOAD_PLUGINS"] = "ppo"
    try:
        return load_registry(strict=True, extra_plugins=[("ppo-test-envs", PPOTestEnvs()), *extra_plugins])
    finally:
        if previous is None:
            del os.environ["RLF_LOAD_PLUGINS"]
        else:
            os.environ["RLF_LOAD_PLUGINS"] = previous

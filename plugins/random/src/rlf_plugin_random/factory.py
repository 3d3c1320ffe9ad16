"""Uniform random acting, and a learner with nothing to learn."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from rlf import Acting, Agent, BuildContext, Learner, StateTree, Transitions, masking, observations


class RandomAgent(Agent):
    def __init__(self, action_spaces: dict[str, spaces.Space], seed: int,
                 observation_spaces: dict[str, spaces.Space] | None = None):
        self.action_spaces = action_spaces
        self.rng = np.random.default_rng(seed)
        # rlf.masking: uniform over the allowed actions where the observation has an "action_mask" part
        self.masked = {agent for agent, space in (observation_spaces or {}).items()
                       if masking.has_mask(space, action_spaces[agent], f"the random agent {agent!r}")}

    def _sample(self, space: spaces.Space, n: int) -> np.ndarray:
        if isinstance(space, spaces.Discrete):
            return space.start + self.rng.integers(0, space.n, size=n)
        if isinstance(space, spaces.Box):
            low = np.where(np.isfinite(space.low), space.low, -1.0)
            high = np.where(np.isfinite(space.high), space.high, 1.0)
            return self.rng.uniform(low, high, size=(n, *space.shape)).astype(space.dtype)
        raise TypeError(f"the random agent cannot sample {space}")

    def act(self, obs, *, explore: bool = True) -> Acting:
        actions = {}
        for agent, batch in obs.items():
            space = self.action_spaces[agent]
            if agent in self.masked:
                actions[agent] = space.start + masking.sample_allowed(self.rng, masking.action_mask(batch))
            else:
                actions[agent] = self._sample(space, observations.rows(batch))
        return Acting(actions)

    def state_dict(self) -> StateTree:
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: StateTree) -> None:
        self.rng.bit_generator.state = state["rng"]


class NoLearning(Learner):
    def __init__(self, agent: RandomAgent):
        self.agent = agent

    def learn(self, experience: Transitions) -> dict[str, float]:
        return {}

    def state_dict(self) -> StateTree:
        return {}

    def load_state_dict(self, state: StateTree) -> None:
        pass


def build_agent(context: BuildContext) -> RandomAgent:
    spec = context.env_spec
    return RandomAgent(spec.action_spaces, context.seed + context.config.seed_offset, spec.observation_spaces)


def build_learner(context: BuildContext, agent: RandomAgent) -> NoLearning:
    return NoLearning(agent)

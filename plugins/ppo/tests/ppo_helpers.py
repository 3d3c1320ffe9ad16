"""Building PPO pieces directly (without a Trainer) for unit tests."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from rlf_plugin_ppo import PPOAgent, PPOConfig, PPOLearner

from rlf import SINGLE_AGENT, BuildContext, EnvSpec, Rollout, RunConfig, compute_gae

CARTPOLE_OBS = spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float32)


def make_spec(observation_spaces: dict, action_spaces: dict, num_envs: int = 4) -> EnvSpec:
    ids = tuple(observation_spaces)
    return EnvSpec("test", ids, dict(observation_spaces), dict(action_spaces), len(ids) > 1, num_envs)


def single_spec(obs_space=CARTPOLE_OBS, action_space=None, num_envs: int = 4) -> EnvSpec:
    return make_spec({SINGLE_AGENT: obs_space}, {SINGLE_AGENT: action_space or spaces.Discrete(2)}, num_envs)


def make_context(spec: EnvSpec, seed: int = 0, steps: int = 10_000, **config) -> BuildContext:
    return BuildContext(env_spec=spec, config=PPOConfig(**config), run=RunConfig(algorithm="ppo", env="test", steps=steps),
                        seed=seed, device="cpu")


def make_pair(spec: EnvSpec, seed: int = 0, steps: int = 10_000, extension=None, **config):
    context = make_context(spec, seed, steps, **config)
    agent = PPOAgent(spec, context.config, seed)
    return agent, PPOLearner(agent, context.config, context, extension=extension)


def sample_obs(space, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if isinstance(space, spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, size=shape)
    if space.dtype == np.uint8:
        return rng.integers(0, 256, size=(*shape, *space.shape), dtype=np.uint8)
    return rng.normal(size=(*shape, *space.shape)).astype(np.float32)


def fake_rollout(agent: PPOAgent, steps: int = 16, seed: int = 0, gamma: float = 0.99, gae_lambda: float = 0.95,
                 alive: dict[str, np.ndarray] | None = None) -> Rollout:
    """A rollout with random observations and rewards, acted on by ``agent`` as the core would."""
    rng = np.random.default_rng(seed)
    spec = agent.spec
    n = spec.num_envs
    ids = spec.agent_ids
    obs = {a: sample_obs(spec.observation_spaces[a], (steps, n), rng) for a in ids}
    next_obs = {a: sample_obs(spec.observation_spaces[a], (steps, n), rng) for a in ids}
    actions, extras = {a: [] for a in ids}, {a: {} for a in ids}
    for t in range(steps):
        acting = agent.act({a: obs[a][t] for a in ids})
        for a in ids:
            actions[a].append(acting.actions[a])
            for key, value in acting.extras[a].items():  # raw_action too, for Box actions
                extras[a].setdefault(key, []).append(value)
    actions = {a: np.stack(v) for a, v in actions.items()}
    extras = {a: {k: np.stack(v) for k, v in e.items()} for a, e in extras.items()}
    rewards = {a: rng.normal(size=(steps, n)).astype(np.float32) for a in ids}
    terminated = {a: rng.random((steps, n)) < 0.05 for a in ids}
    dones = {a: terminated[a] | (rng.random((steps, n)) < 0.05) for a in ids}
    alive = alive or {a: np.ones((steps, n), dtype=bool) for a in ids}
    values = {a: extras[a]["value"].astype(np.float32) for a in ids}
    next_values = {a: agent.value({a: next_obs[a].reshape(steps * n, *next_obs[a].shape[2:])})[a]
                   .reshape(steps, n) for a in ids}
    advantages, returns = {}, {}
    for a in ids:
        advantages[a], returns[a] = compute_gae(rewards[a], values[a], next_values[a], terminated[a], dones[a],
                                                gamma, gae_lambda)
    return Rollout(obs, next_obs, actions, rewards, terminated, dones, alive, extras, values, next_values,
                   advantages, returns)


def weights(agent: PPOAgent) -> dict[str, dict[str, np.ndarray]]:
    return {a: {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}
            for a, net in agent.networks.items()}

"""SAC: squashing and log-probabilities, config validation, checkpoint/resume, and learning Pendulum."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from pydantic import ValidationError
from rlf_plugin_sac import SACConfig
from rlf_plugin_sac.factory import build_agent, build_learner
from rlf_plugin_sac.model import Actor

import rlf
from rlf import BuildContext, EnvSpec, IncompatibleError, RunConfig, Transitions

BOX_ACTIONS = spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))


def spec(actions: spaces.Space = BOX_ACTIONS, num_envs: int = 2) -> EnvSpec:
    return EnvSpec("test", ("agent",), {"agent": spaces.Box(-1, 1, (3,), np.float32)}, {"agent": actions},
                   False, num_envs)


def context(env_spec: EnvSpec, **algo) -> BuildContext:
    config = SACConfig(**{"hidden_sizes": [16, 16], "batch_size": 8, "learning_starts": 0, **algo})
    return BuildContext(env_spec, config, RunConfig(algorithm="sac", env="test"), seed=3, device="cpu")


def transitions(n: int, rng: np.random.Generator) -> Transitions:
    obs = {"agent": rng.uniform(-1, 1, (n, 3)).astype(np.float32)}
    actions = {"agent": rng.uniform(-1, 1, (n, 2)).astype(np.float32)}
    zeros = np.zeros(n, bool)
    return Transitions(obs, actions, {"agent": rng.normal(size=n)}, obs, {"agent": zeros}, {"agent": zeros},
                       {"agent": ~zeros}, zeros)


def test_actions_stay_inside_the_box_with_the_right_shape_and_dtype():
    agent = build_agent(context(spec(num_envs=64)))
    obs = {"agent": np.random.default_rng(0).uniform(-1, 1, (64, 3)).astype(np.float32)}
    for explore in (True, False):
        actions = agent.act(obs, explore=explore).actions["agent"]
        assert actions.shape == (64, 2) and actions.dtype == np.float32
        assert (actions >= BOX_ACTIONS.low).all() and (actions <= BOX_ACTIONS.high).all()
    # the greedy action is the squashed mean: deterministic; sampling is not
    np.testing.assert_array_equal(agent.act(obs, explore=False).actions["agent"],
                                  agent.act(obs, explore=False).actions["agent"])
    assert not np.array_equal(agent.act(obs).actions["agent"], agent.act(obs).actions["agent"])


def test_log_prob_is_the_density_of_the_squashed_action():
    # one dimension, bounds [-2, 2]: p(a) = N(u; mean, std) / |d a / d u| with a = 2 tanh(u)
    actor = Actor(spaces.Box(-1, 1, (1,), np.float32), spaces.Box(-2, 2, (1,), np.float32), [8], "agent")
    obs = torch.zeros(5, 1)
    gen = torch.Generator().manual_seed(0)
    action, log_prob = actor.sample(obs, gen)
    mean, log_std = actor(obs)
    u = torch.atanh(action / 2)
    gauss = torch.distributions.Normal(mean, log_std.exp()).log_prob(u).squeeze(1)
    expected = gauss - torch.log(2 * (1 - torch.tanh(u).pow(2))).squeeze(1)
    torch.testing.assert_close(log_prob, expected, atol=1e-3, rtol=1e-4)


def test_uniform_actions_until_learning_starts_then_the_policy():
    agent = build_agent(context(spec(num_envs=4000), learning_starts=8))
    obs = {"agent": np.zeros((4000, 3), np.float32)}
    uniform = agent.act(obs).actions["agent"]
    # uniform over [-2, 2] x [0, 1]: an untrained policy at one observation is far narrower
    np.testing.assert_allclose(uniform.mean(axis=0), [0.0, 0.5], atol=0.05)
    np.testing.assert_allclose(uniform.std(axis=0), [4 / 12**0.5, 1 / 12**0.5], rtol=0.05)
    agent.on_progress(8, 0)
    policy = agent.act(obs).actions["agent"]
    assert policy.std(axis=0)[0] < 0.9 * uniform.std(axis=0)[0]


@pytest.mark.parametrize("actions", [spaces.Discrete(3), spaces.Box(-np.inf, np.inf, (2,), np.float32)])
def test_refuses_discrete_and_unbounded_actions(actions):
    with pytest.raises(IncompatibleError, match="SAC"):
        build_agent(context(spec(actions)))


@pytest.mark.parametrize("setting", [{"tau": 0.0}, {"gamma": 1.5}, {"batch_size": 0}, {"alpha": -1.0},
                                     {"buffer_size": 10, "batch_size": 64}, {"hidden_sizes": []},
                                     {"no_such_field": 1}])
def test_config_rejects_bad_values(setting):
    with pytest.raises(ValidationError):
        SACConfig(**setting)


def test_every_config_field_is_documented():
    assert all(field.description for field in SACConfig.model_fields.values())


def test_update_moves_the_critic_targets_and_temperature():
    env_spec = spec(num_envs=16)
    agent = build_agent(context(env_spec))
    learner = build_learner(context(env_spec, train_frequency=16), agent)  # 16 env steps: one gradient step
    critic_before = [p.clone() for p in learner.critics["agent"].parameters()]
    target_before = [p.clone() for p in learner.targets["agent"].parameters()]
    rng = np.random.default_rng(0)
    metrics = learner.learn(transitions(16, rng))
    assert {"critic_loss", "actor_loss", "alpha", "alpha_loss", "entropy", "q_mean"} <= set(metrics)
    assert all(math.isfinite(v) for v in metrics.values())
    moved = [not torch.equal(a, b) for a, b in zip(critic_before, learner.critics["agent"].parameters(), strict=True)]
    assert all(moved)
    # Polyak: the target moves by tau of the gap, far less than the critic
    for before, online, target in zip(target_before, learner.critics["agent"].parameters(),
                                      learner.targets["agent"].parameters(), strict=True):
        torch.testing.assert_close(target, before + 0.005 * (online.detach() - before))
    assert learner.log_alphas["agent"].item() != 0.0  # autotune took a step from log(1)
    assert learner.gradient_steps_done == 1
    learner.learn(transitions(16, rng))
    assert learner.gradient_steps_done == 2 and len(learner.buffers["agent"]) == 32


def test_fixed_alpha_stays_fixed():
    env_spec = spec(num_envs=16)
    agent = build_agent(context(env_spec, autotune=False, alpha=0.2))
    learner = build_learner(context(env_spec, autotune=False, alpha=0.2), agent)
    metrics = learner.learn(transitions(16, np.random.default_rng(0)))
    assert metrics["alpha"] == pytest.approx(0.2) and "alpha_loss" not in metrics


def test_checkpoint_restores_weights_optimizers_temperature_counters_and_replay(tmp_path):
    algo = rlf.make("sac", "gym:Pendulum-v1", overrides=[
        "progress=false", "checkpoint_interval=0", "algo.hidden_sizes=[32,32]", "algo.batch_size=32",
        "algo.learning_starts=100", "seed=4", f"run_dir='{tmp_path}'"])
    algo.train(steps=300)
    saved = algo.strategy.state_dict()
    learner = algo.strategy.learner
    # a fresh agent and learner restored from the saved state equal the trained ones
    context = algo.strategy.context
    agent = build_agent(context)
    again = build_learner(context, agent)
    agent.load_state_dict(saved["agent"])
    again.load_state_dict(saved["learner"])
    for trained, loaded in ((algo.strategy.agent.actors["agent"], agent.actors["agent"]),
                            (learner.critics["agent"], again.critics["agent"]),
                            (learner.targets["agent"], again.targets["agent"])):
        for name, value in trained.state_dict().items():
            torch.testing.assert_close(loaded.state_dict()[name], value, msg=name)
    assert again.log_alphas["agent"].item() == pytest.approx(learner.log_alphas["agent"].item())
    assert again.actor_optimizers["agent"].state_dict()["state"][0]["step"] == 200
    assert again.gradient_steps_done == learner.gradient_steps_done == 200
    assert agent.env_steps == 300 and len(again.buffers["agent"]) == 300
    np.testing.assert_array_equal(again.buffers["agent"].actions[:300], learner.buffers["agent"].actions[:300])
    # and through a checkpoint file, training continues from the restored replay and counters
    resumed = rlf.load(algo.save(tmp_path / "mid.rlf"), overrides=[f"run_dir='{tmp_path / 'resumed'}'"])
    resumed.train(steps=500)
    assert resumed.strategy.learner.gradient_steps_done == 400 and len(resumed.strategy.learner.buffers["agent"]) == 500


@pytest.mark.slow
def test_learns_pendulum_well_above_random(tmp_path):
    # A uniform random policy scores about -1200 on Pendulum. Seed 0 gave -181, -666, -671 and -1103 in
    # different runs until the update's samples drew from the process-wide torch RNG; with the learner's
    # own generator it gives -399 every time (10 greedy episodes, ~15 s of CPU). The bar is "clearly
    # above random" rather than "solved": the return at this budget moves with the seed.
    algo = rlf.make("sac", "gym:Pendulum-v1", overrides=[
        "progress=false", "checkpoint_interval=0", f"run_dir='{tmp_path}'", "seed=0", "algo.learning_starts=500",
        "algo.hidden_sizes=[64,64]", "algo.actor_lr=1e-3", "algo.critic_lr=1e-3", "algo.alpha_lr=1e-3"])
    algo.train(steps=4_000)
    result = algo.evaluate(episodes=10)
    assert result["return"] > -900, result

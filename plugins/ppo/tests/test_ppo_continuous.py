"""PPO on Box actions: a diagonal Gaussian policy, clipped actions with the unclipped sample scored, and
the running observation and reward statistics that live in checkpoints and exported agents."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from ppo_helpers import fake_rollout, make_pair, single_spec, weights
from rlf_plugin_ppo import PPOConfig
from rlf_plugin_ppo.model import GaussianActorCritic, gaussian_entropy, gaussian_log_prob

import rlf
from rlf import SINGLE_AGENT, ConfigError

BOX = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
A = SINGLE_AGENT


def obs_batch(n: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    return {A: np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)}


def test_sampled_actions_are_clipped_and_the_raw_sample_is_what_the_log_probability_scores():
    agent, _ = make_pair(single_spec(action_space=BOX), log_std_init=0.5)
    acting = agent.act(obs_batch())
    actions, raw = acting.actions[A], acting.extras[A]["raw_action"]
    assert actions.dtype == np.float32 and actions.shape == (64, 3) == raw.shape
    assert np.all(actions >= -1) and np.all(actions <= 1)
    assert np.any(np.abs(raw) > 1)  # std e^0.5: many draws leave the bounds before clipping
    np.testing.assert_array_equal(actions, np.clip(raw, -1, 1))
    network = agent.networks[A]
    mean, _ = network(torch.as_tensor(obs_batch()[A]))
    expected = gaussian_log_prob(mean, network.log_std, torch.as_tensor(raw))
    np.testing.assert_allclose(acting.extras[A]["log_prob"], expected.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_greedy_actions_are_the_clipped_mean_and_repeat():
    agent, _ = make_pair(single_spec(action_space=BOX))
    first, second = agent.act(obs_batch(), explore=False), agent.act(obs_batch(), explore=False)
    np.testing.assert_array_equal(first.actions[A], second.actions[A])
    mean, _ = agent.networks[A](torch.as_tensor(obs_batch()[A]))
    np.testing.assert_allclose(first.actions[A], np.clip(mean.detach().numpy(), -1, 1), rtol=1e-6)


def test_gaussian_log_density_and_entropy_match_torch_distributions():
    mean, log_std = torch.randn(5, 3), torch.randn(3)
    actions = torch.randn(5, 3)
    reference = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(gaussian_log_prob(mean, log_std, actions), reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(gaussian_entropy(log_std), reference.entropy()[0].sum())


def test_the_update_moves_the_mean_and_the_log_std_and_reports_the_std():
    agent, learner = make_pair(single_spec(action_space=BOX), epochs=2, minibatches=2, log_std_init=-0.5)
    before = weights(agent)
    metrics = learner.learn(fake_rollout(agent))
    after = weights(agent)
    assert not np.array_equal(before[A]["log_std"], after[A]["log_std"])
    assert not np.array_equal(before[A]["actor.0.weight"], after[A]["actor.0.weight"])
    assert metrics["action_std"] == pytest.approx(float(np.exp(after[A]["log_std"]).mean()), rel=1e-6)
    assert all(math.isfinite(v) for v in metrics.values())


def test_rl_zoo_init_and_log_std_settings_are_applied():
    agent, _ = make_pair(single_spec(action_space=BOX), ortho_init=False, log_std_init=-2.0,
                         hidden_sizes=[256, 256], activation="relu")
    network = agent.networks[A]
    assert isinstance(network, GaussianActorCritic)
    assert torch.all(network.log_std == -2.0)
    # torch's default init leaves biases nonzero; the orthogonal init zeroes them
    assert network.actor[0].bias.abs().sum() > 0
    ortho, _ = make_pair(single_spec(action_space=BOX))
    assert ortho.networks[A].actor[0].bias.abs().sum() == 0


@pytest.mark.parametrize(("settings", "phrase"), [
    ({"backend": "numpy"}, "algo.backend='numpy' runs only an MLP"),
])
def test_what_the_gaussian_policy_cannot_do_is_one_line(settings, phrase):
    with pytest.raises(ConfigError, match=phrase) as error:
        make_pair(single_spec(action_space=BOX), **settings)
    assert "\n" not in str(error.value)


def test_box_actions_of_more_than_one_dimension_and_obs_statistics_on_one_hot_inputs_are_refused():
    with pytest.raises(ConfigError, match=r"flat Box action space \(shape \(D,\)\)"):
        make_pair(single_spec(action_space=spaces.Box(-1, 1, shape=(2, 2), dtype=np.float32)))
    with pytest.raises(ConfigError, match="algo.normalize_obs standardises vector observations"):
        make_pair(single_spec(obs_space=spaces.Discrete(5)), normalize_obs=True)


def test_observation_statistics_follow_the_rollouts_and_are_applied_by_the_network():
    spec = single_spec(action_space=BOX)
    agent, learner = make_pair(spec, normalize_obs=True, epochs=1, minibatches=1)
    rollout = fake_rollout(agent, steps=32)
    before = {k: v.clone() for k, v in agent.networks[A].obs_statistics.state_dict().items()}
    assert torch.all(before["mean"] == 0) and torch.all(before["inv_std"] == 1)  # identity until a rollout
    learner.learn(rollout)
    seen = rollout.obs[A].reshape(-1, 4).astype(np.float64)
    statistics = agent.networks[A].obs_statistics
    np.testing.assert_allclose(statistics.mean.numpy(), seen.mean(axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(1 / statistics.inv_std.numpy(), seen.std(axis=0), rtol=1e-4)
    x = torch.as_tensor(seen[:5].astype(np.float32))
    expected = ((x - statistics.mean) * statistics.inv_std).clamp(-10, 10)
    torch.testing.assert_close(agent.networks[A].features(x), expected)
    # an acting copy takes them with the weights; so does a checkpoint (agent state)
    copy_agent, _ = make_pair(spec, normalize_obs=True, seed=1)
    copy_agent.load_state_dict(learner.weights())
    torch.testing.assert_close(copy_agent.networks[A].obs_statistics.mean, statistics.mean)


def test_reward_scaling_divides_by_the_running_std_of_the_discounted_return():
    agent, learner = make_pair(single_spec(action_space=BOX, num_envs=2), normalize_reward=True, gamma=0.9)
    rollout = fake_rollout(agent, steps=40, gamma=0.9)
    learner.learn(rollout)
    rewards, dones = rollout.rewards[A].astype(np.float64), rollout.dones[A]
    running, seen = np.zeros(2), []
    for t in range(len(rewards)):
        running = running * 0.9 + rewards[t]
        seen.append(running.copy())
        running = np.where(dones[t], 0.0, running)
    std = np.std(np.concatenate(seen))
    assert learner.return_statistics[A].std == pytest.approx(std, rel=1e-6)
    np.testing.assert_allclose(learner.running_returns[A], running)
    state = learner.state_dict()
    _, other = make_pair(single_spec(action_space=BOX, num_envs=2), normalize_reward=True, gamma=0.9)
    other.load_state_dict(state)
    np.testing.assert_array_equal(other.running_returns[A], learner.running_returns[A])
    assert other.return_statistics[A].state_dict()["count"] == len(rewards) * 2


def test_a_checkpoint_without_statistics_is_refused_in_one_line_for_a_normalising_learner():
    _, plain = make_pair(single_spec(action_space=BOX))
    _, normalising = make_pair(single_spec(action_space=BOX), normalize_reward=True)
    with pytest.raises(rlf.CheckpointError, match="trained without algo.normalize_reward"):
        normalising.load_state_dict(plain.state_dict())


def test_the_config_defaults_keep_discrete_ppo_as_it_was():
    config = PPOConfig()
    assert (config.ortho_init, config.log_std_init, config.normalize_obs, config.normalize_reward) == \
        (True, 0.0, False, False)
    agent, learner = make_pair(single_spec())
    assert set(agent.networks[A].state_dict()) == {f"{net}.{layer}.{kind}" for net in ("actor", "critic")
                                                   for layer in (0, 2, 4) for kind in ("weight", "bias")}
    assert not {"obs_statistics", "return_statistics"} & set(learner.state_dict())


# -- end to end ---------------------------------------------------------------------------------------

TARGET = ["num_envs=4", "algo.rollout_steps=64", "algo.epochs=4", "algo.minibatches=4", "algo.lr=0.003",
          "algo.anneal_lr=false", "algo.gamma=0.5", "algo.entropy_coef=0.0", "progress=false", "seed=0"]


def test_ppo_learns_a_continuous_target_with_both_normalisations(ppo_registry, tmp_path):
    # reaching a shown point: a unit-std policy around 0 scores about -2.7 per step, the optimum 0.
    # (Exact resume with the statistics: tests/reliability/test_exact_resume.py, case ppo-gaussian.)
    settings = [*TARGET, "algo.normalize_obs=true", "algo.normalize_reward=true"]
    algo = rlf.make("ppo", "target", registry=ppo_registry, overrides=["steps=12288", *settings,
                                                                          f"run_dir='{tmp_path}'"])
    algo.train()
    per_step = algo.evaluate(episodes=20, seed=3)["return"] / 8
    assert per_step > -0.15, per_step
    assert rlf.load(tmp_path, registry=ppo_registry).evaluate(episodes=20, seed=3)["return"] / 8 == per_step


def test_an_exported_gaussian_policy_carries_the_observation_statistics(ppo_registry, tmp_path):
    algo = rlf.make("ppo", "target", registry=ppo_registry,
                    overrides=["steps=1024", *TARGET, "algo.normalize_obs=true", f"run_dir='{tmp_path}'"])
    algo.train()
    export = algo.strategy.agent.export_policy(A)
    assert export.head == "gaussian"
    obs = np.random.default_rng(1).uniform(-1, 1, size=(6, 2)).astype(np.float32)
    mean, log_std = export.module(torch.as_tensor(obs))
    greedy = algo.strategy.agent.act({A: obs}, explore=False).actions[A]
    np.testing.assert_allclose(np.clip(mean.detach().numpy(), -2, 2), greedy, rtol=1e-6)
    assert torch.all(algo.strategy.agent.networks[A].obs_statistics.inv_std != 1)  # statistics were applied
    torch.testing.assert_close(log_std, algo.strategy.agent.networks[A].log_std.expand(6, 2))


@pytest.mark.parametrize(("env", "expected"), [
    ("gym:Pendulum-v1", {"gamma": 0.9, "lr": 1e-3, "minibatches": 64, "normalize_obs": False}),
    ("gym:HalfCheetah-v5", {"gamma": 0.98, "lr": 2.0633e-05, "epochs": 20, "value_coef": 1.16192, "log_std_init": -2.0,
                            "ortho_init": False, "hidden_sizes": [256, 256], "normalize_reward": True}),
    ("gym:Hopper-v5", {"gamma": 0.999, "minibatches": 16, "gae_lambda": 0.99, "activation": "relu"}),
    ("gym:Walker2d-v5", {"gamma": 0.99, "clip_coef": 0.1, "ortho_init": True, "log_std_init": 0.0,
                         "normalize_obs": True}),
])
def test_the_continuous_presets_resolve_to_rl_zoos_settings(ppo_registry, env, expected):
    # resolved only: building a MuJoCo env needs gymnasium[mujoco] (rlf's `mujoco` extra)
    algo = rlf.make("ppo", env, registry=ppo_registry, preset=True)
    config = algo.resolved.algo
    assert {key: getattr(config, key) for key in expected} == expected
    assert algo.resolved.preset.endswith(f"{env.split(':')[1].split('-')[0].lower()}.toml")

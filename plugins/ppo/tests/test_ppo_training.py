"""PPO driven by the core's Trainer: checkpoints, resume, vector modes, images, multi-agent learning."""

import os
import subprocess
import sys

import numpy as np
import pytest
from ppo_helpers import sample_obs
from rlf_plugin_ppo import PPOAgent, PPOConfig
from rlf_plugin_ppo.model import CNNActorCritic

import rlf
from rlf import SINGLE_AGENT, ConfigError, StrategyFamily
from rlf.storage import checkpoint as ckpt
from rlf.testing import restore_only

SHORT = ["num_envs=4", "algo.rollout_steps=32", "algo.epochs=2", "algo.minibatches=2", "progress=false"]


def make(registry, tmp_path, env="gym:CartPole-v1", steps=1024, extra=()):
    return rlf.make("ppo", env, registry=registry,
                    overrides=[f"steps={steps}", *SHORT, f"run_dir='{tmp_path}'", *extra])


def test_registered_as_an_on_policy_algorithm_without_importing_torch(ppo_registry):
    spec = ppo_registry.algorithms["ppo"]
    assert spec.family == StrategyFamily.ON_POLICY and spec.default_env == "gym:CartPole-v1"
    assert spec.action_spaces == ("discrete", "continuous") and spec.run_defaults == {"num_envs": 8}
    assert spec.config is PPOConfig
    code = ("import sys; from rlf.plugins.loading import load_registry; r = load_registry(strict=True); "
            "assert 'ppo' in r.algorithms; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "RLF_LOAD_PLUGINS": "ppo"})
    assert out.stdout.strip() == "False"


def test_save_load_evaluate_gives_identical_greedy_actions(ppo_registry, tmp_path):
    algo = make(ppo_registry, tmp_path / "run")
    algo.train()
    path = algo.save(tmp_path / "ppo.rlf")
    loaded = rlf.load(path, registry=ppo_registry)
    assert algo.evaluate(episodes=3, seed=4) == loaded.evaluate(episodes=3, seed=4)

    saved_agent = ckpt.load(path)["strategy"]["agent"]
    spec = algo.strategy.agent.spec
    original, restored = algo.strategy.agent, PPOAgent(spec, loaded.config.algo, seed=12345)
    restored.load_state_dict(saved_agent)
    obs = {SINGLE_AGENT: sample_obs(spec.observation_spaces[SINGLE_AGENT], (256,), np.random.default_rng(0))}
    np.testing.assert_array_equal(original.act(obs, explore=False).actions[SINGLE_AGENT],
                                  restored.act(obs, explore=False).actions[SINGLE_AGENT])
    np.testing.assert_array_equal(original.value(obs)[SINGLE_AGENT], restored.value(obs)[SINGLE_AGENT])


def test_resume_restores_optimizer_and_counters_then_continues(ppo_registry, tmp_path):
    algo = make(ppo_registry, tmp_path)
    algo.train()
    saved = ckpt.load(tmp_path / "checkpoint.rlf")["strategy"]["learner"]
    assert (saved["updates"], saved["env_steps"]) == (8, 1024)

    restored = rlf.load(tmp_path, registry=ppo_registry)
    restore_only(restored)
    state = restored.strategy.learner.state_dict()
    assert (state["updates"], state["env_steps"]) == (8, 1024)
    assert state["rng"] == saved["rng"]
    for index, param_state in saved["optimizer"]["state"].items():
        for name, value in param_state.items():
            np.testing.assert_array_equal(np.asarray(state["optimizer"]["state"][index][name]).reshape(-1),
                                          np.asarray(value).reshape(-1))

    resumed = rlf.load(tmp_path, registry=ppo_registry)
    summary = resumed.train(steps=2048)
    learner = resumed.strategy.learner
    assert resumed.counters["env_steps"] == 2048 and summary["env_step"] == 2048
    assert (learner.updates, learner.env_steps) == (16, 2048)
    # Adam's per-parameter step counts continue from the checkpoint: 16 updates x 2 epochs x 2 minibatches
    assert {int(s["step"]) for s in learner.optimizer.state.values()} == {64}


def test_async_vector_envs(ppo_registry, tmp_path):
    algo = make(ppo_registry, tmp_path, steps=256, extra=["num_envs=2", "vector='async'"])
    summary = algo.train()
    assert algo.counters["env_steps"] == 256 and np.isfinite(summary["policy_loss"])


def test_multi_discrete_actions_are_rejected_in_one_line(ppo_registry, tmp_path):
    algo = make(ppo_registry, tmp_path, env="target", steps=64, extra=["env.multi_discrete=true"])
    with pytest.raises(ConfigError, match=r"PPO needs Discrete or Box actions.*MultiDiscrete") as error:
        algo.train()
    assert "\n" not in str(error.value)


def test_image_observations_train_with_the_cnn_and_learn_the_cue(ppo_registry, tmp_path):
    algo = rlf.make("ppo", "image", registry=ppo_registry, overrides=[
        "steps=2048", "num_envs=4", "algo.rollout_steps=32", "algo.epochs=4", "algo.minibatches=2",
        "algo.lr=0.001", "algo.gamma=0.5", "algo.cnn_features=64", "algo.torch_threads=1", "progress=false",
        f"run_dir='{tmp_path}'"])
    algo.train()
    assert isinstance(algo.strategy.agent.networks[SINGLE_AGENT], CNNActorCritic)
    # 8 steps per episode, one point for the action matching the frame's brightness; chance is 8/3
    result = rlf.load(tmp_path, registry=ppo_registry).evaluate(episodes=10)
    assert result["return"] >= 7.0


def test_independent_agents_learn_opposite_mappings_with_a_leaver(ppo_registry, tmp_path):
    algo = rlf.make("ppo", "cue", registry=ppo_registry, overrides=[
        "steps=6000", "num_envs=4", "algo.rollout_steps=50", "algo.lr=0.003", "algo.gamma=0.5",
        "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    result = algo.evaluate(episodes=10)
    # episodes last 10 steps; the leaver leaves after 3. Chance is half of each.
    assert result["return/copier"] >= 9.5
    assert result["return/contrarian"] >= 9.5
    assert result["return/leaver"] >= 2.9

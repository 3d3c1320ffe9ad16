"""RND end to end: inside PPO's learner, through rlf.make on CartPole, save/resume, and more
exploration than plain PPO on a sparse-reward corridor."""

import math

import numpy as np
from gymnasium import spaces
from rlf_plugin_ppo import build_agent
from rlf_plugin_rnd.config import RNDConfig
from rlf_plugin_rnd.learner import build_learner
from rnd_support import corridor_rollout, distinct_cells, make_context

import rlf
from rlf import SINGLE_AGENT
from rlf.testing import restore_only

SHORT = ["num_envs=4", "algo.rollout_steps=64", "progress=false", "checkpoint_interval=0"]


def test_ppos_value_head_keeps_extrinsic_returns_and_the_advantage_gets_both_streams():
    context = make_context(RNDConfig(ext_coef=2.0, int_coef=1.0), spaces.Box(0.0, 1.0, (40,), np.float32), 4, 4)
    agent = build_agent(context)
    learner = build_learner(context, agent)
    rollout = corridor_rollout(np.random.default_rng(0).integers(0, 20, (16, 4)), 40)
    rollout.advantages[SINGLE_AGENT][:] = 0.5
    rollout.returns[SINGLE_AGENT][:] = 1.5
    metrics = learner.learn(rollout)
    np.testing.assert_array_equal(learner.last_returns[SINGLE_AGENT], rollout.returns[SINGLE_AGENT])
    intrinsic = learner.last_advantages[SINGLE_AGENT] - 2.0 * 0.5
    assert np.abs(intrinsic).max() > 0
    for key in ("predictor_loss", "int_value_loss", "intrinsic_reward_mean", "extrinsic_reward_mean",
                "policy_loss", "value_loss"):
        assert math.isfinite(metrics[key]), key


def test_short_cartpole_run_has_finite_losses_and_separate_reward_metrics(tmp_path):
    algo = rlf.make("rnd", "gym:CartPole-v1", overrides=["steps=1024", *SHORT, f"run_dir='{tmp_path}'"])
    metrics = algo.train()
    for key in ("policy_loss", "value_loss", "predictor_loss", "int_value_loss", "intrinsic_reward_mean",
                "intrinsic_reward_raw_mean", "extrinsic_reward_mean", "intrinsic_return_std"):
        assert math.isfinite(metrics[key]), key
    assert metrics["extrinsic_reward_mean"] == 1.0
    assert metrics["intrinsic_reward_mean"] > 0


def test_save_and_load_restore_networks_statistics_and_optimizer(tmp_path):
    algo = rlf.make("rnd", "gym:CartPole-v1", overrides=["steps=512", *SHORT, f"run_dir='{tmp_path / 'a'}'"])
    algo.train()
    algo.save(tmp_path / "rnd.rlf")
    saved = algo.strategy.learner.state_dict()["extension"]
    resumed = rlf.load(tmp_path / "rnd.rlf", overrides=[f"run_dir='{tmp_path / 'b'}'"])
    restore_only(resumed)
    state = resumed.strategy.learner.state_dict()["extension"]
    for name, array in saved["networks"].items():
        np.testing.assert_array_equal(state["networks"][name], array)
    for part in ("obs_stats", "return_stats"):
        for key, value in saved[part][SINGLE_AGENT].items():
            np.testing.assert_array_equal(state[part][SINGLE_AGENT][key], value)
    np.testing.assert_array_equal(state["running_returns"][SINGLE_AGENT], saved["running_returns"][SINGLE_AGENT])
    np.testing.assert_array_equal(state["generator"], saved["generator"])
    again = rlf.load(tmp_path / "rnd.rlf", overrides=[f"run_dir='{tmp_path / 'c'}'"])
    again.train(steps=768)
    assert again.strategy.learner.env_steps == 768


def test_explores_more_of_a_sparse_corridor_than_plain_ppo(tmp_path):
    cells = {name: [distinct_cells(name, tmp_path / f"{name}{seed}", steps=24_576, seed=seed) for seed in (0, 1)]
             for name in ("ppo", "rnd")}
    assert all(rnd > ppo for rnd, ppo in zip(cells["rnd"], cells["ppo"], strict=True)), cells
    assert sum(cells["rnd"]) >= sum(cells["ppo"]) + 10, cells

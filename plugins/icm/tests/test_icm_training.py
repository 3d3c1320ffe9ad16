"""ICM end to end through rlf.make: finite losses on CartPole, save/resume, and more exploration
than plain PPO on a sparse-reward corridor."""

import math

import numpy as np
from icm_support import distinct_cells

import rlf
from rlf import SINGLE_AGENT
from rlf.testing import restore_only

SHORT = ["num_envs=4", "algo.rollout_steps=64", "progress=false", "checkpoint_interval=0"]


def test_short_cartpole_run_has_finite_losses_and_separate_reward_metrics(tmp_path):
    algo = rlf.make("icm", "gym:CartPole-v1", overrides=["steps=1024", *SHORT, f"run_dir='{tmp_path}'"])
    metrics = algo.train()
    for key in ("policy_loss", "value_loss", "forward_loss", "inverse_loss", "intrinsic_reward_mean",
                "extrinsic_reward_mean"):
        assert math.isfinite(metrics[key]), key
    assert metrics["extrinsic_reward_mean"] == 1.0  # CartPole pays 1 per step; intrinsic is logged apart
    assert metrics["intrinsic_reward_mean"] > 0


def test_save_and_load_restore_the_curiosity_module_and_optimizer(tmp_path):
    algo = rlf.make("icm", "gym:CartPole-v1", overrides=["steps=512", *SHORT, f"run_dir='{tmp_path / 'a'}'"])
    algo.train()
    algo.save(tmp_path / "icm.rlf")
    saved = algo.strategy.learner.state_dict()
    again = rlf.load(tmp_path / "icm.rlf", overrides=[f"run_dir='{tmp_path / 'b'}'"])
    again.train(steps=768)
    learner = again.strategy.learner
    assert learner.env_steps == 768 and learner.updates == saved["updates"] + 1
    resumed = rlf.load(tmp_path / "icm.rlf", overrides=[f"run_dir='{tmp_path / 'c'}'"])
    restore_only(resumed)
    state = resumed.strategy.learner.state_dict()
    for name, array in saved["extension"]["modules"].items():
        np.testing.assert_array_equal(state["extension"]["modules"][name], array)
    assert state["optimizer"]["state"].keys() == saved["optimizer"]["state"].keys()
    module = resumed.strategy.learner.extension.module(SINGLE_AGENT)
    assert module.forward_model[0].weight.requires_grad


def test_explores_more_of_a_sparse_corridor_than_plain_ppo(tmp_path):
    # ICM's lead over PPO on this corridor at this budget is a few cells per seed (measured with seeds
    # 0-3: 27/27, 28/26, 34/32, 29/26), so it is asserted over four seeds rather than two: never
    # behind on any, and ahead overall
    seeds = (0, 1, 2, 3)
    cells = {name: [distinct_cells(name, tmp_path / f"{name}{seed}", steps=24_576, seed=seed) for seed in seeds]
             for name in ("ppo", "icm")}
    assert all(icm >= ppo for icm, ppo in zip(cells["icm"], cells["ppo"], strict=True)), cells
    assert sum(cells["icm"]) >= sum(cells["ppo"]) + 5, cells


def test_icm_trains_a_recurrent_ppo_policy(tmp_path):
    """PPO's memory (algo.memory) with the curiosity extension: the extension's loss runs on the valid steps
    of each sequence minibatch (Minibatch.indices into the flattened rollout, as without memory)."""
    from rlf.cli.commands import main
    from rlf.testing import read_csv

    run = tmp_path / "run"
    assert main(["train", "icm", "--env", "gym:rlf.envs.cartpole_positions:CartPolePositions-v1", "--steps", "1024",
                 "--no-progress", "--set", "algo.memory='lstm'", "--set", "algo.memory_size=8",
                 "--set", "algo.rollout_steps=32", "--set", "loggers=['csv']", "--set", "log_interval=256",
                 "--run-dir", str(run)]) == 0
    rows = [row for row in read_csv(run / "metrics.csv") if "forward_loss" in row]
    assert rows and all(row["forward_loss"] > 0 and row["inverse_loss"] > 0 for row in rows)

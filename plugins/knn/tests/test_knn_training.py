"""kNN episodic novelty end to end through rlf.make: finite losses on CartPole with both embeddings,
save/resume, and more exploration than plain PPO on a sparse-reward corridor."""

import math

import numpy as np
import pytest
from knn_support import distinct_cells

import rlf
from rlf import SINGLE_AGENT
from rlf.testing import restore_only

SHORT = ["num_envs=4", "algo.rollout_steps=64", "progress=false", "checkpoint_interval=0"]


@pytest.mark.parametrize("embedding", ["inverse_dynamics", "random"])
def test_short_cartpole_run_has_finite_losses_and_separate_reward_metrics(tmp_path, embedding):
    algo = rlf.make("knn", "gym:CartPole-v1", overrides=["steps=1024", *SHORT, f"run_dir='{tmp_path}'",
                                                         f"algo.embedding='{embedding}'"])
    metrics = algo.train()
    keys = ["policy_loss", "value_loss", "intrinsic_reward_mean", "episodic_reward_mean", "extrinsic_reward_mean",
            "knn_mean_distance", "memory_fill"]
    if embedding == "inverse_dynamics":
        keys.append("inverse_loss")
    for key in keys:
        assert math.isfinite(metrics[key]), key
    assert metrics["extrinsic_reward_mean"] == 1.0
    assert metrics["intrinsic_reward_mean"] > 0


def test_save_and_load_restore_the_embedding_and_the_distance_statistics(tmp_path):
    algo = rlf.make("knn", "gym:CartPole-v1", overrides=["steps=512", *SHORT, f"run_dir='{tmp_path / 'a'}'"])
    algo.train()
    algo.save(tmp_path / "knn.rlf")
    saved = algo.strategy.learner.state_dict()["extension"]
    resumed = rlf.load(tmp_path / "knn.rlf", overrides=[f"run_dir='{tmp_path / 'b'}'"])
    restore_only(resumed)
    extension = resumed.strategy.learner.extension
    state = extension.state_dict()
    for name, array in saved["embeddings"].items():
        np.testing.assert_array_equal(state["embeddings"][name], array)
    assert state["memories"] == saved["memories"]
    assert int(extension.memories[SINGLE_AGENT].counts.sum()) == 0  # new episodes, empty memories
    again = rlf.load(tmp_path / "knn.rlf", overrides=[f"run_dir='{tmp_path / 'c'}'"])
    again.train(steps=768)
    assert again.strategy.learner.env_steps == 768


def test_explores_more_of_a_sparse_corridor_than_plain_ppo(tmp_path):
    cells = {name: [distinct_cells(name, tmp_path / f"{name}{seed}", steps=24_576, seed=seed) for seed in (0, 1)]
             for name in ("ppo", "knn")}
    assert all(knn > ppo for knn, ppo in zip(cells["knn"], cells["ppo"], strict=True)), cells
    assert sum(cells["knn"]) >= sum(cells["ppo"]) + 10, cells

"""ActorCritic end to end through rlf: it learns (CartPole, a predator chasing a random prey), its
curves reach the core's stats, its numbers stay finite on the 3v3 grid, and checkpoints round-trip."""

import numpy as np
import pytest
from rlf_plugin_actor_critic.testing import check_finite_on_the_3v3_grid, check_predator_learns, make_run

import rlf
from rlf.testing import assert_trees_equal, restore_only


def make(tmp_path, env, *overrides):
    return make_run("actor-critic", tmp_path, env, *overrides)


@pytest.mark.slow
def test_cartpole_is_balanced_far_longer_than_by_chance(tmp_path):
    # Measured: greedy returns of 305, 470, 473 after 30k steps (seeds 0, 1, 2); chance lasts ~22 steps.
    algo = make(tmp_path, "gym:CartPole-v1", "steps=30000", "num_envs=8", "seed=0")
    algo.train()
    assert algo.evaluate(episodes=20)["return"] > 100


@pytest.mark.slow
def test_a_predator_learns_to_catch_a_random_prey_sooner_and_more_often_than_a_random_one(tmp_path):
    # Measured (seeds 0, 1): from ~35k steps on, the stochastic policy catches in 100 % of episodes in
    # ~15 steps, the greedy one in ~13; a random predator catches in ~27 %, after ~59 steps.
    check_predator_learns("actor-critic", tmp_path, "steps=50000", "num_envs=8", steps_ratio=0.6)


@pytest.mark.slow
def test_numbers_stay_finite_for_450_episodes_of_the_3v3_grid_with_both_teams_learning(tmp_path):
    # The source's A3C overflowed its return normaliser within ~450 episodes of this scenario.
    check_finite_on_the_3v3_grid("actor-critic", tmp_path, "num_envs=16")


def test_a_checkpoint_restores_weights_optimizer_statistics_counters_and_sampling(tmp_path):
    overrides = ["env.scenario='chase-1v1'", "steps=600", "num_envs=2", "seed=3"]
    algo = make(tmp_path / "run", "predator-prey", *overrides)
    algo.train()
    path = algo.save(tmp_path / "ac.rlf")
    again = rlf.load(path, overrides=[f"run_dir='{tmp_path / 'again'}'"])
    restore_only(again)
    assert_trees_equal(again.strategy.state_dict()["agent"], algo.strategy.state_dict()["agent"])
    assert_trees_equal(again.strategy.state_dict()["learner"], algo.strategy.state_dict()["learner"])
    assert again.strategy.learner.updates == algo.strategy.learner.updates == 300
    obs = {"predator_0": np.random.default_rng(0).uniform(-4, 4, (32, 2)).astype(np.float32)}
    assert np.array_equal(again.strategy.agent.act(obs).actions["predator_0"],
                          algo.strategy.agent.act(obs).actions["predator_0"])
    assert again.evaluate(episodes=5, seed=1) == algo.evaluate(episodes=5, seed=1)
    resumed = rlf.load(path, overrides=[f"run_dir='{tmp_path / 'resumed'}'"])
    resumed.train(steps=1000)
    assert resumed.counters["env_steps"] == 1000 and resumed.strategy.learner.updates == 500


def test_dict_observations_train_evaluate_and_resume(tmp_path):
    from rlf_plugin_actor_critic.testing import check_dict_observations

    check_dict_observations("actor-critic", tmp_path)

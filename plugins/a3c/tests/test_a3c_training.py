"""A3C end to end through rlf, with its asynchronous workers: it learns (CartPole, a predator chasing a
random prey), its curves reach the core's stats, its numbers stay finite on the 3v3 grid, and
checkpoints of the shared model round-trip."""

import numpy as np
import pytest
from rlf_plugin_actor_critic.testing import check_finite_on_the_3v3_grid, check_predator_learns, make_run

import rlf
from rlf.testing import assert_trees_equal


def make(tmp_path, env, *overrides):
    return make_run("a3c", tmp_path, env, *overrides)


@pytest.mark.slow
def test_cartpole_is_balanced_far_longer_than_by_chance(tmp_path):
    # Measured with 4 workers: greedy returns of 500 after 30k steps (seeds 0, 1); chance lasts ~22 steps.
    # Asynchronous workers make a run irreproducible, so the margin is wide.
    algo = make(tmp_path, "gym:CartPole-v1", "steps=30000", "seed=0")
    algo.train()
    assert algo.evaluate(episodes=20)["return"] > 100


@pytest.mark.slow
def test_a_predator_learns_to_catch_a_random_prey_sooner_and_more_often_than_a_random_one(tmp_path):
    # Measured with 4 workers (seeds 0, 1): from ~28k steps on, the stochastic policy catches in 100 % of
    # episodes in ~14 steps, the greedy one in ~13; a random predator catches in ~27 %, after ~59 steps.
    check_predator_learns("a3c", tmp_path, "steps=40000", steps_ratio=0.6)


@pytest.mark.slow
def test_numbers_stay_finite_for_450_episodes_of_the_3v3_grid_with_both_teams_learning(tmp_path):
    # The source's A3C overflowed its return normaliser within ~450 episodes of this scenario.
    check_finite_on_the_3v3_grid("a3c", tmp_path, "num_envs=4")  # 4 workers x 4 envs


def test_a_checkpoint_restores_weights_optimizer_statistics_counters_and_sampling(tmp_path):
    overrides = ["env.scenario='chase-1v1'", "steps=600", "algo.async_workers=2", "seed=3"]
    algo = make(tmp_path / "run", "predator-prey", *overrides)
    algo.train()
    assert algo.counters["env_steps"] == 600  # the workers together, exactly the budget
    path = algo.save(tmp_path / "a3c.rlf")
    again = rlf.load(path, overrides=[f"run_dir='{tmp_path / 'again'}'"])
    obs = {"predator_0": np.random.default_rng(0).uniform(-4, 4, (32, 2)).astype(np.float32)}
    seen = {}

    class Restored(rlf.Callback):
        """What was restored, seen before the first step (a target at the checkpoint's step trains nothing)."""

        def on_start(self, trainer):
            seen["state"] = trainer.strategy.state_dict()
            seen["updates"] = trainer.strategy.learner.updates
            seen["actions"] = trainer.strategy.agent.act(obs).actions["predator_0"]
            seen["eval"] = again.evaluate(episodes=5, seed=1)
            trainer.request_stop("inspected")

    again.train(steps=601, callbacks=[Restored()])
    assert_trees_equal(seen["state"]["agent"], algo.strategy.state_dict()["agent"])
    assert_trees_equal(seen["state"]["learner"], algo.strategy.state_dict()["learner"])
    # Every worker's update landed in the shared model the main process saved: 600 steps / 5 per update.
    assert seen["updates"] == algo.strategy.learner.updates == 120
    assert np.array_equal(seen["actions"], algo.strategy.agent.act(obs).actions["predator_0"])
    assert seen["eval"] == algo.evaluate(episodes=5, seed=1)
    resumed = rlf.load(path, overrides=[f"run_dir='{tmp_path / 'resumed'}'"])
    resumed.train(steps=1000)
    assert resumed.counters["env_steps"] == 1000 and resumed.strategy.learner.updates == 200

"""vector=ray collects exactly what vector=async collects from the same seed: the same observations,
rewards and episode ends step by step, and so the same PPO run, bit for bit, on CartPole and on the
multi-agent predator-prey grid."""

import numpy as np
import pytest
from rlf_plugin_predator_prey.config import PredatorPreyConfig
from rlf_plugin_predator_prey.env import make_env as make_predator_prey
from rlf_plugin_ray import RayCollectorConfig, RayVector

import rlf
from rlf import StepBatch
from rlf.envs import GymVector, ParallelVector
from rlf.envs.gym import GymEnvConfig, make_gym_env
from rlf.testing import assert_trees_equal, read_csv

CARTPOLE = rlf.EnvFactory(make_gym_env, GymEnvConfig(id="CartPole-v1"))
# 3 predators and 3 prey, all learning: captured prey leave mid-episode (alive masks, zero observations)
PREDATOR_PREY = rlf.EnvFactory(make_predator_prey, PredatorPreyConfig(scenario="grid-3v3", learners="all"))
FIELDS = ("obs", "next_obs", "rewards", "terminated", "truncated", "alive")


def assert_same_batch(got: StepBatch, expected: StepBatch, step: int) -> None:
    for name in FIELDS:
        assert set(getattr(got, name)) == set(getattr(expected, name))
        for agent, array in getattr(expected, name).items():
            np.testing.assert_array_equal(getattr(got, name)[agent], array, err_msg=f"{name}[{agent}] at step {step}")
            assert getattr(got, name)[agent].dtype == array.dtype
    np.testing.assert_array_equal(got.episode_ended, expected.episode_ended)
    np.testing.assert_array_equal(got.reward_matrix, expected.reward_matrix)
    assert got.ended_envs == expected.ended_envs
    assert got.episode_metrics == expected.episode_metrics


def play(ray_envs, local_envs, steps: int, seed: int) -> tuple[int, int]:
    """Random play on both, alternating whole steps and part-by-part steps.

    Returns the episodes that ended and the steps where some agent had left its episode."""
    expected_reset, got_reset = local_envs.reset(seed=seed), ray_envs.reset(seed=seed)
    for agent, obs in expected_reset.items():
        np.testing.assert_array_equal(got_reset[agent], obs)
    rng = np.random.default_rng(seed)
    ended = absent = 0
    n = local_envs.num_envs
    for step in range(steps):
        actions = {a: rng.integers(0, space.n, size=n) for a, space in local_envs.spec.action_spaces.items()}
        expected = local_envs.step(actions)
        if step % 2:
            got = ray_envs.step(actions)
        else:  # every part sent before any is collected, as the pipelined on-policy loop does
            for index, rows in enumerate(ray_envs.parts):
                ray_envs.step_async(index, {a: array[rows] for a, array in actions.items()})
            got = StepBatch.concat([ray_envs.step_wait(index) for index in range(len(ray_envs.parts))])
        assert_same_batch(got, expected, step)
        for array in got.obs.values():  # copied out of the object store: writable like local arrays
            assert array.flags.writeable
        ended += len(got.ended_envs)
        absent += any(not alive.all() for alive in got.alive.values())
    return ended, absent


def test_cartpole_steps_match_async_workers_bit_for_bit(local_ray):
    # 7 envs: async makes parts of 4 and 3; one env per actor makes several actors per part
    ray_envs = RayVector("gym:CartPole-v1", CARTPOLE, 7, RayCollectorConfig(envs_per_actor=1))
    local_envs = GymVector("gym:CartPole-v1", CARTPOLE, 7, subprocess=True)
    try:
        assert ray_envs.parts == local_envs.parts == [slice(0, 4), slice(4, 7)]
        assert len(ray_envs.actors) == 7
        assert ray_envs.spec == local_envs.spec
        assert play(ray_envs, local_envs, 300, seed=11)[0] >= 50  # autoresets included
        assert ray_envs.restarts == 0
    finally:
        ray_envs.close()
        local_envs.close()


def test_predator_prey_steps_match_the_local_vector_bit_for_bit(local_ray):
    ray_envs = RayVector("predator-prey", PREDATOR_PREY, 4, RayCollectorConfig(envs_per_actor=2))
    local_envs = ParallelVector("predator-prey", PREDATOR_PREY, 4)
    try:
        assert ray_envs.parts == local_envs.parts == [slice(0, 4)]
        assert ray_envs.spec.agent_ids == local_envs.spec.agent_ids and len(ray_envs.spec.agent_ids) > 1
        ended, absent = play(ray_envs, local_envs, 300, seed=3)
        assert ended >= 4 and absent >= 10  # caught prey left their episodes early
    finally:
        ray_envs.close()
        local_envs.close()


@pytest.mark.parametrize(("env", "settings"), [
    ("gym:CartPole-v1", ["num_envs=4", "collector.envs_per_actor=1"]),
    ("predator-prey", ["num_envs=2", "env.scenario='grid-3v3'", "env.learners='all'"]),
])
def test_ppo_trains_the_same_on_ray_as_on_async(local_ray, tmp_path, env, settings):
    runs = {}
    for vector in ("async", "ray"):
        algo = rlf.make("ppo", env, overrides=[
            "steps=600", "seed=5", "algo.rollout_steps=50", "progress=false", f"vector={vector}",
            f"run_dir='{tmp_path / vector}'", *[s for s in settings if vector == "ray" or "collector" not in s]])
        algo.train()
        runs[vector] = algo
    episodes = {vector: read_csv(tmp_path / vector / "episodes.csv") for vector in runs}
    assert len(episodes["ray"]) >= 2 and episodes["ray"] == episodes["async"]
    assert_trees_equal(runs["ray"].strategy.weights(), runs["async"].strategy.weights())
    metrics = read_csv(tmp_path / "ray" / "metrics.csv")
    assert metrics[-1]["env_step"] == 600 and "env_restarts" not in metrics[-1]

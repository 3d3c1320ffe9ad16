"""A dead env actor is restarted by Ray: its envs' interrupted episodes are dropped and fresh ones
start, the other envs never notice, training goes on and counts the restarts; past
collector.max_restarts the run stops with one line, and its last checkpoint resumes."""

import os
import signal

import gymnasium
import numpy as np
import pytest
from rlf_plugin_ray import RayCollectorConfig, RayVector
from rlf_plugin_ray.collector import RESTART_SEED_STRIDE

import rlf
from rlf import SINGLE_AGENT
from rlf.envs import GymVector
from rlf.envs.gym import GymEnvConfig, make_gym_env
from rlf.errors import EnvWorkerError
from rlf.testing import read_csv

CARTPOLE = rlf.EnvFactory(make_gym_env, GymEnvConfig(id="CartPole-v1"))


def kill(envs: RayVector, actor: int) -> None:
    os.kill(envs.actors[actor].where["pid"], signal.SIGKILL)


def test_a_killed_actor_restarts_with_fresh_episodes_and_the_other_envs_go_on_unchanged(local_ray):
    envs = RayVector("gym:CartPole-v1", CARTPOLE, 4, RayCollectorConfig(envs_per_actor=1, max_restarts=2))
    reference = GymVector("gym:CartPole-v1", CARTPOLE, 4, subprocess=False)
    try:
        first_pid = envs.actors[1].where["pid"]
        envs.reset(seed=20)
        reference.reset(seed=20)
        rng = np.random.default_rng(0)
        others = [0, 2, 3]
        for step in range(60):
            actions = {SINGLE_AGENT: rng.integers(0, 2, size=4)}
            if step == 25:
                kill(envs, 1)
            got, expected = envs.step(actions), reference.step(actions)
            for name in ("obs", "next_obs", "rewards", "terminated", "truncated"):
                np.testing.assert_array_equal(getattr(got, name)[SINGLE_AGENT][others],
                                              getattr(expected, name)[SINGLE_AGENT][others])
            if step == 25:  # the lost step: an episode end, dropped, nothing to learn from (not alive)
                assert 1 in got.ended_envs and got.episode_ended[1] and got.dropped == (1,)
                assert not got.alive[SINGLE_AGENT][1] and got.rewards[SINGLE_AGENT][1] == 0.0
                assert not got.terminated[SINGLE_AGENT][1] and not got.truncated[SINGLE_AGENT][1]
                fresh, _ = gymnasium.make("CartPole-v1").reset(seed=20 + 1 + RESTART_SEED_STRIDE)
                np.testing.assert_array_equal(got.obs[SINGLE_AGENT][1], fresh)
                assert envs.restarts == 1
            elif step < 25:
                assert not got.dropped
        assert envs.actors[1].where["pid"] != first_pid and envs.actors[1].restarts == 1
        assert [actor.restarts for actor in envs.actors] == [0, 1, 0, 0]
    finally:
        envs.close()
        reference.close()


def test_a_dead_actor_without_restarts_left_is_one_clear_error(local_ray):
    envs = RayVector("gym:CartPole-v1", CARTPOLE, 2, RayCollectorConfig(envs_per_actor=1, max_restarts=0))
    try:
        envs.reset(seed=0)
        kill(envs, 0)
        with pytest.raises(EnvWorkerError) as caught:
            for _ in range(3):  # the death may land after the first step was already answered
                envs.step({SINGLE_AGENT: np.zeros(2, dtype=np.int64)})
        message = str(caught.value)
        assert "\n" not in message
        assert message.startswith("env actor 0 (envs 0-0) died for good after 0 restarts (collector.max_restarts=0)")
    finally:
        envs.close()


def flaky(ray_registry, tmp_path, steps, *settings):
    signals = tmp_path / "signals"
    signals.mkdir(exist_ok=True)
    return rlf.make("ppo", "flaky", registry=ray_registry, overrides=[
        f"steps={steps}", "seed=1", "algo.rollout_steps=16", "progress=false", "log_interval=64", "vector=ray",
        "collector.envs_per_actor=1", f"env.signals='{signals}'", f"run_dir='{tmp_path / 'run'}'", *settings])


def test_training_goes_on_through_actor_deaths_and_logs_the_restarts(local_ray, ray_registry, tmp_path):
    # two of the four envs' actors die (an env kills its own process, as a segfault would)
    algo = flaky(ray_registry, tmp_path, 640, "num_envs=4", "env.crashes=2", "env.crash_at=30",
                 "collector.max_restarts=1")
    algo.train()
    assert algo.counters["env_steps"] == 640
    assert len(list((tmp_path / "signals").glob("crash.*"))) == 2
    last = read_csv(tmp_path / "run" / "metrics.csv")[-1]
    assert last["env_restarts"] == 2.0 and last["episodes_dropped"] == 2.0


def test_exhausted_restarts_stop_the_run_and_its_last_checkpoint_resumes(local_ray, ray_registry, tmp_path):
    # one actor, restarted once, dies again: the run stops with one line
    algo = flaky(ray_registry, tmp_path, 10_000, "num_envs=1", "env.crashes=2", "env.crash_at=40",
                 "collector.max_restarts=1", "checkpoint_interval=16")
    with pytest.raises(EnvWorkerError) as caught:
        algo.train()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("env actor 0 (envs 0-0) died for good after 1 restart (collector.max_restarts=1): ")
    reached = algo.counters["env_steps"]
    assert 40 <= reached < 10_000
    resumed = rlf.load(tmp_path / "run", registry=ray_registry, overrides=["vector=sync"])
    saved = resumed.counters["env_steps"]
    assert 16 <= saved <= reached
    resumed.train(steps=saved + 32)
    assert resumed.counters["env_steps"] == saved + 32

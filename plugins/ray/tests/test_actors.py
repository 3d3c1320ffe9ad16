"""Off-policy actors on Ray (`algo.actors=N` with `vector=ray`): DQN learns from them, lockstep mode
hands the learner bit for bit what the local actor processes hand it, and a dead actor is restarted
(counted as `actor_restarts`) until collector.max_restarts, after which the run stops with one line
and a checkpoint that resumes."""

import multiprocessing as mp

import pytest

import rlf
from rlf.errors import EnvWorkerError
from rlf.testing import assert_trees_equal, read_csv

# A small network learning from the start, weights pushed every 64 env steps (each actor's chunk).
SMALL_DQN = ["algo.hidden_sizes=[64]", "algo.min_replay_size=64", "algo.batch_size=32", "algo.torch_threads=1",
             "algo.actor_sync_interval=64", "algo.target_update_interval=100"]


def dqn(env, tmp_path, *settings, registry=None):
    return rlf.make("dqn", env, registry=registry, overrides=[
        "progress=false", f"run_dir='{tmp_path}'", "checkpoint_interval=0", *settings])


def test_dqn_learns_cartpole_from_two_ray_actors(local_ray, tmp_path):
    # DQN's defaults; greedy evaluations every 1,000 steps. The actors run free, so which weights
    # collect which chunk depends on timing and no seed fixes the outcome: the budget leaves room.
    algo = dqn("gym:CartPole-v1", tmp_path, "steps=6000", "seed=1", "algo.actors=2", "vector=ray",
               "algo.torch_threads=1", "eval_interval=1000", "eval_episodes=5")
    algo.train()
    learner = algo.strategy.learner
    assert learner.env_steps == 6000 and learner.train_steps > 4000
    assert mp.active_children() == []  # no local actor processes: the actors were Ray's
    # Random play balances ~22 steps. At 4,000 steps a loaded CI run once peaked at 91.6 (quiet runs of
    # seeds 0-5: 167-450). By 6,000 steps, seeds 0-9 peaked at 165-293 quiet,
    # and seeds 1, 2, 10-12 at 197-358 beside four busy loops on the 2 cores.
    evaluations = [row["return"] for row in read_csv(tmp_path / "eval.csv")]
    assert len(evaluations) == 6 and max(evaluations) >= 100, evaluations


def test_lockstep_ray_actors_hand_the_learner_what_local_actors_hand_it(local_ray, tmp_path):
    runs = {}
    for vector in ("sync", "ray"):  # sync: the actors are local processes; ray: Ray actors
        algo = dqn("gym:CartPole-v1", tmp_path / vector, "steps=512", "seed=4", "num_envs=2", "algo.actors=2",
                   "algo.actor_lockstep=true", f"vector={vector}", *SMALL_DQN)
        algo.train()
        runs[vector] = algo
    local, remote = runs["sync"].strategy.learner, runs["ray"].strategy.learner
    assert local.env_steps == remote.env_steps == 512 and remote.train_steps > 100  # it learned, weights moved
    replay = remote.buffers["agent"]
    assert len(replay) == 512
    # every transition, in order (the replay), and so every gradient step (weights, optimizer, targets)
    assert_trees_equal(remote.state_dict(), local.state_dict())
    episodes = read_csv(tmp_path / "ray" / "episodes.csv")
    assert len(episodes) >= 10 and episodes == read_csv(tmp_path / "sync" / "episodes.csv")


def test_a_killed_ray_actor_is_restarted_and_the_run_goes_on(local_ray, ray_registry, tmp_path):
    signals = tmp_path / "signals"
    signals.mkdir()
    # one env kills its own actor process (as a segfault or the OOM killer would) at its 70th step: in
    # its actor's second chunk, after the first log row. Lockstep, so the learner waits for that chunk:
    # taking chunks as they come, the surviving actor can supply the whole budget before Ray reports
    # the death, and a death nobody waits for is never seen
    algo = dqn("flaky", tmp_path / "run", "steps=640", "seed=1", "algo.actors=2", "algo.actor_lockstep=true",
               "vector=ray",
               "collector.max_restarts=1", f"env.signals='{signals}'", "env.crashes=1", "env.crash_at=70",
               "log_interval=64", *SMALL_DQN, registry=ray_registry)
    algo.train()
    assert algo.counters["env_steps"] == 640 and algo.strategy.learner.env_steps == 640
    assert len(list(signals.glob("crash.*"))) == 1
    rows = read_csv(tmp_path / "run" / "metrics.csv")
    assert "actor_restarts" not in rows[0] and rows[-1]["actor_restarts"] == 1.0
    # the count is the run's, as env_restarts is: a resume goes on from it (the crash was used up)
    resumed = rlf.load(tmp_path / "run", registry=ray_registry)
    resumed.train(steps=768)
    rows = read_csv(tmp_path / "run" / "metrics.csv")
    assert rows[-1]["env_step"] == 768 and rows[-1]["actor_restarts"] == 1.0
    assert resumed.counters["actor_restarts"] == 1


def test_exhausted_actor_restarts_stop_the_run_with_one_line_and_a_checkpoint_that_resumes(
        local_ray, ray_registry, tmp_path):
    signals = tmp_path / "signals"
    signals.mkdir()
    # lockstep: one call in flight, so the restarted actor's first chunk is taken before its env's
    # second crash (with two in flight, Ray may report that death before the chunk is collected)
    algo = dqn("flaky", tmp_path / "run", "steps=10000", "seed=1", "algo.actors=1", "algo.actor_lockstep=true",
               "vector=ray", "collector.max_restarts=1", f"env.signals='{signals}'", "env.crashes=2", "env.crash_at=100",
               "checkpoint_interval=64", *SMALL_DQN, registry=ray_registry)
    with pytest.raises(EnvWorkerError) as caught:
        algo.train()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("off-policy actor 0 died for good after 1 restart (collector.max_restarts=1): ")
    reached = algo.counters["env_steps"]
    assert 100 <= reached < 10_000
    resumed = rlf.load(tmp_path / "run", registry=ray_registry, overrides=["vector=sync"])
    saved = resumed.counters["env_steps"]
    assert 64 <= saved <= reached
    resumed.train(steps=saved + 128)
    assert resumed.counters["env_steps"] == saved + 128

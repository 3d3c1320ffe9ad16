"""APPO end to end on CartPole with real actor processes: it learns, an actor killed mid-run is dropped
and replaced (or not, past the restart budget), losing every actor stops with one line and a
checkpoint that resumes, a finished run resumes and evaluates (Ray hosting them: tests/integration/test_appo_ray.py)."""

import multiprocessing as mp
import os
import signal
import time

import numpy as np
import pytest
from appo_helpers import read_rows, returns

import rlf
from rlf.errors import RlfError


def appo(tmp_path, *settings):
    """APPO on CartPole at the preset the plugin installs (what `rlf train appo` runs)."""
    return rlf.make("appo", "gym:CartPole-v1", preset=True, overrides=[
        "progress=false", f"run_dir='{tmp_path}'", "checkpoint_interval=0", "log_interval=512", *settings])


class KillActor(rlf.Callback):
    """Sends one actor process ``signum`` once the run passes ``at`` env steps (SIGKILL: as the OOM
    killer would; SIGSTOP: a hang)."""

    def __init__(self, at: int, index: int = 0, signum: int = signal.SIGKILL):
        self.at, self.index, self.signum = at, index, signum
        self.killed: list[int] = []

    def on_step(self, trainer, result):
        if not self.killed and trainer.counters["env_steps"] >= self.at:
            pid = trainer.strategy.pool.pids()[self.index]
            os.kill(pid, self.signum)
            self.killed.append(pid)


def no_actor_left_behind(pids, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and mp.active_children():
        time.sleep(0.1)
    assert mp.active_children() == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.slow
def test_appo_learns_cartpole(tmp_path):
    """Random play balances ~22 steps, an untrained greedy policy ~10. Measured with the preset, 30k env
    steps, on the 2-core machine running two Mario trainings and a CI rehearsal beside it: the last 20
    training episodes averaged 77-230 (the actors' scheduling, and so the policy's staleness, differs
    from run to run; 77 in one CI rehearsal), the greedy evaluation of the final policy 283-500 (seeds 0,
    0, 1). The thresholds sit well below both: the sampled curve at least triples, the greedy policy
    balances more than 10 times as long as an untrained one."""
    algo = appo(tmp_path, "steps=30000", "seed=0")
    started = time.monotonic()
    algo.train()
    spent = time.monotonic() - started
    episodes = returns(tmp_path)
    first, last = float(np.mean(episodes[:20])), float(np.mean(episodes[-20:]))
    assert first < 40, first
    assert last >= 3 * first and last >= 50, (first, last, spent)
    greedy = algo.evaluate(episodes=10)["return"]
    assert greedy >= 120, (greedy, first, last, spent)
    rows = read_rows(tmp_path / "metrics.csv")
    staleness = [float(row["staleness"]) for row in rows]
    # two actors, at most two chunks ahead each: a learner update never lags by much more
    assert 0 < np.mean(staleness) <= 8, staleness
    assert int(float(rows[-1]["env_step"])) == 30000


def test_a_killed_actor_is_replaced_and_the_run_goes_on(tmp_path):
    killer = KillActor(at=1024)
    algo = appo(tmp_path, "steps=4096", "algo.actors=2", "algo.actor_restarts=1")
    algo.train(callbacks=[killer])
    assert algo.counters["env_steps"] == 4096
    rows = read_rows(tmp_path / "metrics.csv")
    last = rows[-1]
    assert float(last["actors_lost"]) == 1 and float(last["actors_joined"]) == 1
    assert float(last["actors_alive"]) == 2
    # the loss is counted from the row after it, not before
    assert float(rows[0]["actors_lost"]) == 0
    no_actor_left_behind(killer.killed)


class StopActorAndWait(KillActor):
    """SIGSTOPs an actor, then slows the learner down until the pool noticed: the other actor alone
    could otherwise finish the budget before ``env_timeout`` passes."""

    def on_step(self, trainer, result):
        super().on_step(trainer, result)
        if self.killed and trainer.strategy.pool.lost == 0:
            time.sleep(0.25)


def test_a_hung_actor_is_killed_after_env_timeout_and_replaced(tmp_path, capsys):
    killer = StopActorAndWait(at=1024, signum=signal.SIGSTOP)
    algo = appo(tmp_path, "steps=4096", "algo.actors=2", "algo.actor_restarts=1", "env_timeout=2")
    algo.train(callbacks=[killer])
    last = read_rows(tmp_path / "metrics.csv")[-1]
    assert float(last["actors_lost"]) == 1 and float(last["actors_joined"]) == 1
    assert "made no progress for 2 s" in capsys.readouterr().err
    no_actor_left_behind(killer.killed)


def test_past_the_restart_budget_the_run_continues_with_the_actors_left(tmp_path):
    killer = KillActor(at=1024, index=1)
    algo = appo(tmp_path, "steps=4096", "algo.actors=2", "algo.actor_restarts=0")
    algo.train(callbacks=[killer])
    assert algo.counters["env_steps"] == 4096
    last = read_rows(tmp_path / "metrics.csv")[-1]
    assert float(last["actors_lost"]) == 1 and float(last["actors_joined"]) == 0
    assert float(last["actors_alive"]) == 1


def test_losing_every_actor_stops_with_one_line_and_a_checkpoint_that_resumes(tmp_path):
    killer = KillActor(at=1024)
    algo = appo(tmp_path, "steps=4096", "algo.actors=1", "algo.actor_restarts=0")
    with pytest.raises(RlfError) as caught:
        algo.train(callbacks=[killer])
    text = str(caught.value)
    assert "\n" not in text and "all actors were lost" in text and "--resume" in text, text
    assert "actor 0" in text and "SIGKILL" in text, text
    stopped_at = algo.counters["env_steps"]
    assert 1024 <= stopped_at < 4096
    no_actor_left_behind(killer.killed)
    resumed = rlf.load(tmp_path)
    assert resumed.counters["env_steps"] == stopped_at  # the checkpoint is the state at the stop
    # the loss counts against the budget across the resume; the new run has its actor again
    resumed.train(steps=4096)
    assert resumed.counters["env_steps"] == 4096
    last = read_rows(tmp_path / "metrics.csv")[-1]
    assert float(last["actors_lost"]) == 1 and float(last["actors_alive"]) == 1


def test_resume_continues_the_learner_and_the_run_evaluates(tmp_path):
    algo = appo(tmp_path, "steps=2048", "seed=3")
    algo.train()
    updates = algo.strategy.learner.updates
    assert updates == 2048 // 128
    resumed = rlf.load(tmp_path)
    resumed.train(steps=4096)
    assert resumed.strategy.learner.updates == 2 * updates
    assert resumed.strategy.learner.env_steps == 4096
    rows = read_rows(tmp_path / "metrics.csv")
    assert [int(float(row["env_step"])) for row in rows] == list(range(512, 4097, 512))
    # rlf eval's path: the checkpoint's agent is PPO's, acting greedily
    evaluated = rlf.load(tmp_path).evaluate(episodes=3)
    assert evaluated["episodes"] == 3 and evaluated["return"] >= 8

"""GymVector's supervision of its AsyncVectorEnv workers, driven directly (no training, no torch)."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from rlf.builtin_envs import GymEnvConfig, make_gym_env
from rlf.envs import EnvFactory, GymVector, Supervision
from rlf.errors import EnvWorkerError
from rlf.interfaces import SINGLE_AGENT
from rlf.plugins import LazyCallable
from rlf.training.strategy import EpisodeTracker

FACTORY = EnvFactory(LazyCallable("rlf.builtin_envs:make_gym_env"), GymEnvConfig(id="CartPole-v1"))


@pytest.fixture
def envs(request):
    made = []

    def build(**supervision):
        vector = GymVector("gym:CartPole-v1", FACTORY, 4, subprocess=True, supervision=Supervision(**supervision))
        made.append(vector)
        return vector

    yield build
    for vector in made:
        vector.close()


def _step(vector, steps=1):
    batch = None
    for _ in range(steps):
        batch = vector.step({SINGLE_AGENT: np.zeros(4, dtype=np.int64)})
    return batch


def _worker_pids(vector):
    return [process.pid for group in vector.groups for process in group.processes]


def test_a_dead_worker_is_one_error_naming_env_worker_and_signal(envs):
    vector = envs()
    vector.reset(seed=0)
    _step(vector, 3)
    pid = _worker_pids(vector)[3]
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(EnvWorkerError) as caught:
        _step(vector)
    message = str(caught.value)
    assert "\n" not in message
    assert f"env worker 3 of gym:CartPole-v1 (pid {pid}) was killed by signal SIGKILL during step" in message
    assert "env_restarts" in message
    assert all(not process.is_alive() for process in vector.groups[1].processes)


def test_a_hung_worker_is_reported_after_env_timeout(envs):
    vector = envs(timeout=1.0)
    vector.reset(seed=0)
    pid = _worker_pids(vector)[0]
    os.kill(pid, signal.SIGSTOP)
    try:
        with pytest.raises(EnvWorkerError, match=rf"worker 0 of gym:CartPole-v1 \(pid {pid}\) did not answer "
                                                 r"within 1 s \(run.env_timeout\)"):
            _step(vector)
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert not vector.groups[0].processes[0].is_alive()  # killed, not left stopped


def test_with_restarts_the_group_is_replaced_and_its_episodes_dropped(envs):
    vector = envs(restarts=1)
    vector.reset(seed=0)
    tracker = EpisodeTracker((SINGLE_AGENT,), 4, False)
    for _ in range(3):
        tracker.update(_step(vector))
    old = _worker_pids(vector)
    os.kill(old[1], signal.SIGKILL)
    batch = _step(vector)
    assert vector.restarts == 1
    assert batch.dropped == (0, 1) and batch.ended_envs[:2] == [0, 1]
    assert not batch.alive[SINGLE_AGENT][:2].any() and batch.alive[SINGLE_AGENT][2:].all()
    assert batch.rewards[SINGLE_AGENT][:2].tolist() == [0.0, 0.0]
    assert tracker.update(batch) == [] and tracker.dropped == 2 and tracker.episodes == 0
    new = _worker_pids(vector)
    assert new[:2] != old[:2] and new[2:] == old[2:]
    after = _step(vector, 2)  # the new group steps like the old one
    assert after.rewards[SINGLE_AGENT].tolist() == [1.0] * 4
    os.kill(_worker_pids(vector)[0], signal.SIGKILL)  # the one restart is spent
    with pytest.raises(EnvWorkerError, match=r"during step after 1 restart\(s\); raise run.env_restarts"):
        _step(vector)


def test_pipelined_parts_recover_too(envs):
    """The on-policy strategy steps each group with step_async/step_wait while acting for another."""
    vector = envs(restarts=1)
    vector.reset(seed=0)
    zeros = {SINGLE_AGENT: np.zeros(2, dtype=np.int64)}
    os.kill(_worker_pids(vector)[2], signal.SIGKILL)
    vector.step_async(0, zeros)
    vector.step_async(1, zeros)
    assert vector.step_wait(0).dropped == ()
    assert vector.step_wait(1).dropped == (0, 1)
    vector.step_async(1, zeros)
    assert vector.step_wait(1).rewards[SINGLE_AGENT].tolist() == [1.0, 1.0]


def test_close_after_a_failure_does_not_hang(envs):
    vector = envs()
    vector.reset(seed=0)
    vector.step_async(0, {SINGLE_AGENT: np.zeros(2, dtype=np.int64)})
    os.kill(_worker_pids(vector)[0], signal.SIGKILL)
    vector.close()  # a group waiting on a dead worker is killed, not waited on
    assert all(not pid_alive for pid_alive in (p.is_alive() for g in vector.groups for p in g.processes))


def test_make_gym_env_is_the_factory_used():
    assert FACTORY.build_env.target is make_gym_env

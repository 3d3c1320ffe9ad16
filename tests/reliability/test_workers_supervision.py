"""GymVector's supervision of its AsyncVectorEnv workers, driven directly (no training, no torch)."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import numpy as np
import pytest

from rlf.envs import EnvFactory, GymVector, Supervision
from rlf.envs.gym import GymEnvConfig, make_gym_env
from rlf.errors import EnvWorkerError
from rlf.interfaces import SINGLE_AGENT
from rlf.plugins import LazyCallable
from rlf.training.episodes import EpisodeTracker
from rlf.training.startup import supervise
from rlf.training.strategy import BaseStrategy

FACTORY = EnvFactory(LazyCallable("rlf.envs.gym:make_gym_env"), GymEnvConfig(id="CartPole-v1"))


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
    assert not vector.groups[1].processes[1].is_alive()
    vector.close()  # the others are killed, not waited on: the run is stopping
    assert all(not process.is_alive() for group in vector.groups for process in group.processes)


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


def test_with_restarts_only_the_dead_worker_is_replaced_and_its_episode_dropped(envs):
    vector = envs(restarts=1)
    vector.reset(seed=0)
    tracker = EpisodeTracker((SINGLE_AGENT,), 4, False)
    for _ in range(3):  # pushing left, CartPole's episodes last about 9 steps: none ends in 3
        assert tracker.update(_step(vector)) == []
    old = _worker_pids(vector)
    os.kill(old[1], signal.SIGKILL)
    batch = _step(vector)
    assert vector.restarts == 1
    assert batch.dropped == (1,) and batch.ended_envs == [1]
    assert batch.alive[SINGLE_AGENT].tolist() == [True, False, True, True]
    assert batch.rewards[SINGLE_AGENT].tolist() == [1.0, 0.0, 1.0, 1.0]
    assert tracker.update(batch) == [] and tracker.dropped == 1 and tracker.episodes == 0
    new = _worker_pids(vector)
    assert new[1] != old[1] and [new[0], *new[2:]] == [old[0], *old[2:]]
    assert all(process.is_alive() for group in vector.groups for process in group.processes)
    # the new worker's env began a fresh episode, the others go on with theirs
    assert abs(batch.obs[SINGLE_AGENT][1]).max() <= 0.05 < abs(batch.obs[SINGLE_AGENT][0]).max()
    after = _step(vector, 2)  # the new worker steps like the old one
    assert after.rewards[SINGLE_AGENT].tolist() == [1.0] * 4
    os.kill(_worker_pids(vector)[0], signal.SIGKILL)  # the one restart is spent
    with pytest.raises(EnvWorkerError, match=r"worker 0 of .* during step after 1 restart\(s\); raise "
                                             r"run.env_restarts"):
        _step(vector)


def test_a_worker_lost_right_after_its_episode_ended_drops_no_episode(envs):
    """Only interrupted episodes are counted: one that had not taken a step yet lost nothing."""
    vector = envs(restarts=1)
    vector.reset(seed=0)
    tracker = EpisodeTracker((SINGLE_AGENT,), 4, False)
    batch = _step(vector)
    while not batch.ended_envs:
        tracker.update(batch)
        batch = _step(vector)
    tracker.update(batch)
    ended = batch.ended_envs[0]
    os.kill(_worker_pids(vector)[ended], signal.SIGKILL)
    lost = _step(vector)
    assert lost.dropped == (ended,) and vector.restarts == 1
    tracker.update(lost)
    assert tracker.dropped == 0


def test_pipelined_parts_recover_too(envs):
    """The on-policy strategy steps each group with step_async/step_wait while acting for another."""
    vector = envs(restarts=1)
    vector.reset(seed=0)
    zeros = {SINGLE_AGENT: np.zeros(2, dtype=np.int64)}
    os.kill(_worker_pids(vector)[2], signal.SIGKILL)
    vector.step_async(0, zeros)
    vector.step_async(1, zeros)
    assert vector.step_wait(0).dropped == ()
    assert vector.step_wait(1).dropped == (0,)  # env 2 is the second group's first
    vector.step_async(1, zeros)
    assert vector.step_wait(1).rewards[SINGLE_AGENT].tolist() == [1.0, 1.0]


def test_a_worker_lost_during_reset_is_replaced_without_dropping_an_episode(envs):
    vector = envs(restarts=1)
    vector.reset(seed=0)
    os.kill(_worker_pids(vector)[3], signal.SIGKILL)
    obs = vector.reset(seed=1)[SINGLE_AGENT]
    assert vector.restarts == 1 and obs.shape == (4, 4) and abs(obs).max() <= 0.05
    assert _step(vector).dropped == ()


def test_close_after_a_failure_does_not_hang(envs):
    vector = envs()
    vector.reset(seed=0)
    vector.step_async(0, {SINGLE_AGENT: np.zeros(2, dtype=np.int64)})
    os.kill(_worker_pids(vector)[0], signal.SIGKILL)
    vector.close()  # a group waiting on a dead worker is killed, not waited on
    assert all(not pid_alive for pid_alive in (p.is_alive() for g in vector.groups for p in g.processes))


def test_make_gym_env_is_the_factory_used():
    assert FACTORY.build_env.target is make_gym_env


class _Strategy(BaseStrategy):
    """BaseStrategy's supervision bookkeeping, over envs a test built itself."""

    def __init__(self, envs):
        super().__init__(SimpleNamespace(name="x", plugin="y"), "gym:CartPole-v1", None, None)
        self.envs = envs
        self.tracker = EpisodeTracker((SINGLE_AGENT,), 4, False)

    step = weights = state_dict = load_state_dict = teardown = None


def test_restarts_used_before_a_resume_still_count(envs):
    """``env_restarts`` is a budget for the whole run: the checkpoint's counters carry what was used,
    handed to the envs before their first reset (which may itself need a restart)."""
    run = SimpleNamespace(env_timeout=60.0, env_restarts=1)
    algorithm = SimpleNamespace(name="x", plugin="y")
    old = envs()
    supervise(old, run, algorithm, 0)  # a checkpoint from before the counter: none used
    strategy = _Strategy(old)
    strategy.resume_supervision({"env_steps": 512})
    assert strategy.restarts_used == 0 and strategy.supervision_counters() == {}

    vector = envs()
    strategy = _Strategy(vector)
    strategy.resume_supervision({"env_steps": 512, "env_restarts": 1, "episodes_dropped": 1})
    supervise(vector, run, algorithm, strategy.restarts_used)  # what BaseStrategy.setup does
    strategy.tracker.dropped = strategy._dropped_before
    assert strategy.supervision_counters() == {"env_restarts": 1, "episodes_dropped": 1}
    assert strategy.supervision_metrics() == {"env_restarts": 1.0, "episodes_dropped": 1.0}
    os.kill(_worker_pids(vector)[0], signal.SIGKILL)
    with pytest.raises(EnvWorkerError, match=r"during reset after 1 restart\(s\)"):
        vector.reset(seed=0)

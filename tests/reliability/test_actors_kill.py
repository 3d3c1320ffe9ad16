"""Off-policy actor processes (``algo.actors``, DQN) and A3C's async workers, killed or stopped for
real mid-run: each loss is one line naming the actor or worker, its pid and how it ended, exit 1
within seconds, no hang, no process left behind and the last checkpoint loadable.

Before these were supervised, a killed DQN actor went unnoticed (the run went on with the other
actor); a killed A3C worker ended in a ``RuntimeError`` traceback.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from faults import children, error_lines, start_rlf, wait_for

from rlf.storage import checkpoint

DQN = ("train", "dqn", "--env", "gym:CartPole-v1", "--set", "algo.actors=2", "--set", "algo.min_replay_size=64",
       "--set", "checkpoint_interval=512", "--set", "log_interval=512", "--no-progress", "--steps", "10000000")
A3C = ("train", "a3c", "--env", "gym:CartPole-v1", "--set", "algo.async_workers=2",
       "--set", "checkpoint_interval=512", "--set", "log_interval=512", "--no-progress", "--steps", "10000000")


def forked_children(pid: int) -> list[int]:
    """Children of ``pid`` started by fork (same command line), not its resource tracker."""
    own = Path(f"/proc/{pid}/cmdline").read_bytes()
    found = []
    for child in children(pid):
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes() == own:
                found.append(child)
        except OSError:
            continue
    return sorted(found)


def _lose_one(args, tmp_path, how, expected_children=2) -> tuple[Path, int, float, str]:
    """Start a run, wait for its first checkpoint, send ``how`` to one of its forked processes."""
    run = tmp_path / "run"
    process = start_rlf(*args, "--run-dir", str(run), cwd=tmp_path)
    try:
        wait_for((run / "checkpoint.rlf").is_file, 240, "the first checkpoint", process)
        forked = wait_for(lambda: forked_children(process.pid), 30, "the actors", process)
        assert len(forked) == expected_children, forked
        victim = forked[1]
        os.kill(victim, how)
        lost_at = time.monotonic()
        _, stderr = process.communicate(timeout=120)
        reported_after = time.monotonic() - lost_at
    finally:
        if process.poll() is None:
            process.kill()
        for pid in forked_children(process.pid) if process.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
    assert process.returncode == 1, stderr
    assert "Traceback" not in stderr, stderr
    assert not [pid for pid in forked if _alive(pid)], "an actor outlived the run"
    return run, victim, reported_after, stderr


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _assert_checkpoint_intact(run: Path) -> None:
    state = checkpoint.load(run / "checkpoint.rlf")
    assert state["counters"]["env_steps"] >= 512


def test_a_killed_dqn_actor_stops_the_run_with_one_line(tmp_path):
    run, victim, after, stderr = _lose_one(DQN, tmp_path, signal.SIGKILL)
    [line] = error_lines(stderr)
    assert f"off-policy actor 1 of dqn on gym:CartPole-v1 (pid {victim}) was killed by signal SIGKILL" in line, line
    assert f"--resume {run}" in line, line
    assert after < 30, after
    _assert_checkpoint_intact(run)


def test_a_stopped_dqn_actor_is_reported_after_env_timeout(tmp_path):
    run, victim, after, stderr = _lose_one((*DQN, "--set", "env_timeout=8"), tmp_path, signal.SIGSTOP)
    [line] = error_lines(stderr)
    assert f"off-policy actor 1 of dqn on gym:CartPole-v1 (pid {victim}) made no progress for 8 s " \
           "(run.env_timeout)" in line, line
    assert 6 < after < 40, after
    _assert_checkpoint_intact(run)


def test_a_killed_a3c_worker_stops_the_run_with_one_line(tmp_path):
    run, victim, after, stderr = _lose_one(A3C, tmp_path, signal.SIGKILL)
    [line] = error_lines(stderr)
    assert f"async worker 1 of a3c on gym:CartPole-v1 (pid {victim}) was killed by signal SIGKILL" in line, line
    assert f"--resume {run}" in line, line
    assert after < 30, after
    _assert_checkpoint_intact(run)

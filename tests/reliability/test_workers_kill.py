"""Env worker supervision, tested by really killing a Gymnasium AsyncVectorEnv worker mid-run.

Without restarts the run stops within seconds with one line naming the env, the worker and the
signal, a non-zero exit and the last checkpoint loadable; with ``env_restarts`` it restarts the
worker's group, drops the interrupted episodes from the stats, counts the restart and finishes.
"""

from __future__ import annotations

import csv
import os
import signal
import time

from faults import env_workers, error_lines, start_rlf, wait_for

from rlf import checkpoint

TRAIN = ("train", "ppo", "--env", "gym:CartPole-v1", "--set", "vector=async", "--set", "num_envs=4",
         "--set", "algo.rollout_steps=32", "--set", "checkpoint_interval=256", "--set", "log_interval=256",
         "--no-progress")


def _kill_a_worker_after_first_checkpoint(run, process) -> tuple[int, float]:
    ckpt = run / "checkpoint.rlf"
    wait_for(ckpt.is_file, 240, "the first checkpoint", process)
    workers = wait_for(lambda: env_workers(process.pid), 30, "the env workers", process)
    assert len(workers) == 4, workers
    victim = workers[2]
    os.kill(victim, signal.SIGKILL)
    return victim, time.monotonic()


def test_a_killed_worker_stops_the_run_with_one_line_and_the_checkpoint_intact(tmp_path):
    run = tmp_path / "run"
    process = start_rlf(*TRAIN, "--steps", "10000000", "--run-dir", str(run), cwd=tmp_path)
    try:
        victim, killed_at = _kill_a_worker_after_first_checkpoint(run, process)
        _, stderr = process.communicate(timeout=60)
        reported_after = time.monotonic() - killed_at
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, stderr
    assert "Traceback" not in stderr and "EOFError" not in stderr and "BrokenPipe" not in stderr, stderr
    [line] = error_lines(stderr)
    assert "gym:CartPole-v1" in line and f"pid {victim}" in line and "SIGKILL" in line, line
    assert "env_restarts" in line and f"--resume {run}" in line, line
    assert reported_after < 30, reported_after
    state = checkpoint.load(run / "checkpoint.rlf")
    assert state["counters"]["env_steps"] >= 256
    assert not env_workers(process.pid)


def test_with_restarts_a_killed_worker_is_replaced_and_the_run_finishes(tmp_path):
    run = tmp_path / "run"
    process = start_rlf(*TRAIN, "--steps", "6000", "--set", "env_restarts=2", "--run-dir", str(run),
                        cwd=tmp_path)
    try:
        _kill_a_worker_after_first_checkpoint(run, process)
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr and "done:" in stdout, (stdout, stderr)
    with (run / "metrics.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    last = rows[-1]
    assert float(last["env_step"]) >= 6000
    assert float(last["env_restarts"]) == 1.0
    # the worker's group (2 envs) was mid-episode: both episodes are dropped, not logged
    assert float(last["episodes_dropped"]) == 2.0
    with (run / "episodes.csv").open() as handle:
        episodes = list(csv.DictReader(handle))
    assert [int(float(row["episode"])) for row in episodes] == list(range(1, len(episodes) + 1))
    assert all(float(row["length"]) >= 1 for row in episodes)
    assert checkpoint.load(run / "checkpoint.rlf")["counters"]["env_steps"] >= 6000

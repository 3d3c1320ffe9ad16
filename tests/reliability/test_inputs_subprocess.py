"""A sample of the bad-input corpus as real processes: the exit code the shell sees, one stderr line,
no traceback, and nothing written."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from faults import error_lines

CASES = {
    "bool-for-int": ["train", "random", "--env", "gym:CartPole-v1", "--set", "steps=true"],
    "algorithm-via-set": ["train", "random", "--env", "gym:CartPole-v1", "--set", "algorithm=dqn"],
    "env-not-a-name": ["train", "random", "--set", "env=5"],
    "tuple-observations": ["train", "random", "--env", "gym:Blackjack-v1", "--steps", "10"],
    "config-is-a-directory": ["train", "random", "--env", "gym:CartPole-v1", "--config", "."],
    "argparse": ["train", "random", "--steps", "many"],
    "device": ["train", "random", "--env", "gym:CartPole-v1", "--steps", "10", "--set", 'device="cuda:99"'],
    "resume-changes-env": ["train", "--resume", "nope", "--set", 'env="gym:Acrobot-v1"'],
}


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_real_process_exit_code_and_one_line(argv, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RLF_STRICT_PLUGINS", None)
    result = subprocess.run([sys.executable, "-m", "rlf.cli", *argv], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and len(error_lines(result.stderr)) == 1, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_one_line(tmp_path):
    """ENOSPC while writing the run (/dev/full answers every write with it)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this platform to simulate a full disk")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.csv").symlink_to("/dev/full")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "rlf.cli", "train", "random", "--env", "gym:CartPole-v1",
                             "--steps", "64", "--no-progress", "--set", "log_interval=8", "--run-dir", str(run)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = error_lines(result.stderr)
    assert "No space left on device" in line and "free some space" in line

"""The benchmark scripts outside CI's timed runs: bad input and a missing peer or GPU end in one line
with exit code 2, before anything slow starts (the comparisons themselves are run by hand)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "benchmarks" / "peers"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, timeout=120)


@pytest.mark.parametrize(("script", "option", "venv"), [
    ("dqn_cartpole.py", "--sb3-python", "pip install -c constraints.txt torch==2.13.0 stable-baselines3"),
    ("ppo_cartpole.py", "--sb3-python", "pip install -c constraints.txt torch==2.13.0 stable-baselines3"),
    ("ppo_mario.py", "--sb3-python", "pip install -c constraints.txt torch==2.13.0 stable-baselines3 . plugins/mario"),
    ("tabular_chase.py", "--ppage-python", "pip install ppage==0.9.2"),
])
def test_missing_peer_venv_is_one_line_naming_the_fix(tmp_path, script, option, venv):
    done = run(str(PEERS / script), option, str(tmp_path / "nowhere" / "python"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0] and venv in lines[0], done.stderr
    assert "Traceback" not in done.stderr


def test_peer_without_the_package_is_one_line(tmp_path):
    python = tmp_path / "python"  # an interpreter on which every import fails
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    done = run(str(PEERS / "dqn_cartpole.py"), "--sb3-python", str(python))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot import stable_baselines3" in lines[0], done.stderr


def test_bad_budget_is_one_line():
    done = run(str(PEERS / "tabular_chase.py"), "--steps", "0")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: --steps, --rounds and --num-envs must be at least 1"]


def test_gpu_check_without_cuda_is_one_line():
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu.sh")], capture_output=True, text=True, cwd=REPO,
                          timeout=120, env={"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"})
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "docker/Dockerfile.gpu" in lines[0]


def test_mario_budget_below_one_rollout_is_one_line():
    done = run(str(PEERS / "ppo_mario.py"), "--steps", "100")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: --steps must be at least 1024 (one rollout) and --rounds at least 1"]


def test_mario_startup_with_a_missing_baseline_is_one_line(tmp_path):
    done = run(str(REPO / "benchmarks" / "mario_startup.py"), "--baseline", str(tmp_path / "python"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--baseline" in done.stderr

"""scripts/pytest_plugins/rlf_no_litter.py, which tox_env.py loads into every env: a test that leaves a run
directory under ./runs fails and names it; tests that keep their runs in tmp_path pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TESTS = '''
from pathlib import Path

def test_litters():
    Path("runs", "ppo-gym-CartPole-v1-20261203-101010").mkdir(parents=True)

def test_keeps_to_its_tmp_path(tmp_path):
    (tmp_path / "runs" / "x").mkdir(parents=True)
'''


def test_a_run_directory_left_in_the_working_directory_fails_that_test(tmp_path):
    (tmp_path / "test_sample.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "scripts" / "pytest_plugins")}
    done = subprocess.run([sys.executable, "-P", "-m", "pytest", "-p", "no:cacheprovider", "-p", "rlf_no_litter",
                           "-q", "test_sample.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "2 passed, 1 error" in out
    assert "ERROR at teardown of test_litters" in out
    assert "left runs/ppo-gym-CartPole-v1-20261203-101010 in the repository" in out
    assert "test_keeps_to_its_tmp_path" not in out.split("short test summary")[-1]

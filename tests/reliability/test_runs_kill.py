"""kill -9 at random points of training and inside checkpoint writes, then resume, again and again.

After every kill: the latest checkpoint (and the kept previous one) loads and never went back in env
steps, the CSVs are consistent, no temporary file is left outside the run directory and nothing
outside it was written. A final resume must finish with a complete, consistent history.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_support import assert_history_consistent, child_env, make_site, read_csv, tree

from rlf.finite import first_non_finite
from rlf.storage import checkpoint as ckpt

KILLS_PER_TEST = 11   # two tests: 22 kills per run of the suite

# The child is the real CLI; with a marker path set, checkpoint writes are slowed down and announce
# themselves, so the parent can kill inside a write (between array members, or inside the rotation of
# the kept copies) instead of hoping to hit a window of a millisecond.
CHILD = r"""
import os, sys, time
marker = os.environ.get("RLF_TEST_WRITE_MARKER")
if marker:
    import numpy as np
    import rlf.storage.checkpoint as c
    real_write_array, real_rotate = np.lib.format.write_array, c._rotate
    def write_array(*args, **kwargs):
        open(marker, "w").close()
        time.sleep(0.01)
        return real_write_array(*args, **kwargs)
    def rotate(*args, **kwargs):
        real_rotate(*args, **kwargs)
        time.sleep(0.02)
    np.lib.format.write_array, c._rotate = write_array, rotate
from rlf.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""
# CSV only: what is checked here, and TensorBoard's import would double each start on a loaded machine
TRAIN = ["--no-progress", "--set", "log_interval=25", "--set", "checkpoint_interval=300", "--set", "loggers=['csv']"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("site"))


def _start(run: Path, cwd: Path, site: Path, marker: Path | None) -> subprocess.Popen:
    if (run / "checkpoint.rlf").is_file():
        args = ["train", "--resume", str(run), "--steps", "1000000000", *TRAIN[:1]]
    else:  # killed before its first checkpoint: what is there is not a run to continue
        args = ["train", "tabular-q", "--env", "line", "--steps", "1000000000", *TRAIN, "--run-dir", str(run),
                "--overwrite"]
    extra = {"RLF_TEST_WRITE_MARKER": str(marker)} if marker else {}
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=cwd, env=child_env(site, **extra),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _owner_pid(run: Path) -> int | None:
    try:
        return json.loads((run / ".rlf-owner.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def _check_after_kill(run: Path, last_step: int) -> int:
    step = last_step
    if (run / "run.json").is_file():   # written atomically: whole or the previous version, never torn
        assert json.loads((run / "run.json").read_text())["format"] == "rlf-run"
    if (run / "checkpoint.rlf").is_file():
        state = ckpt.load(run / "checkpoint.rlf")
        step = state["counters"]["env_steps"]
        assert step >= last_step, f"checkpoint went back from env step {last_step} to {step}"
        assert first_non_finite(state, "state") is None
        if (run / "checkpoint-1.rlf").is_file():
            assert ckpt.load(run / "checkpoint-1.rlf")["counters"]["env_steps"] <= step
    assert_history_consistent(run, complete=False)
    return step


def _kill_loop(tmp_path: Path, site: Path, in_writes: bool, seed: int) -> None:
    rng = random.Random(seed)
    run, cwd, marker = tmp_path / "run", tmp_path / "cwd", tmp_path / "writing"
    cwd.mkdir()
    outside = tree(site)
    last_step, kills, torn_writes = 0, 0, 0
    while kills < KILLS_PER_TEST:
        marker.unlink(missing_ok=True)
        child = _start(run, cwd, site, marker if in_writes else None)
        try:
            deadline = time.monotonic() + 60
            if in_writes:
                while not marker.exists():
                    assert child.poll() is None, child.stderr.read()
                    assert time.monotonic() < deadline, "no checkpoint write within 60 s"
                    time.sleep(0.005)
                time.sleep(rng.uniform(0.0, 0.25))
            else:  # once this process is training (start-up time varies with the machine's load)
                while _owner_pid(run) != child.pid:
                    assert child.poll() is None, child.stderr.read()
                    assert time.monotonic() < deadline, "the run did not start within 60 s"
                    time.sleep(0.01)
                owned = time.time()   # then a row written after that: the loop is running
                while _mtime(run / "metrics.csv") < owned or not (run / "metrics.csv").stat().st_size:
                    assert child.poll() is None, child.stderr.read()
                    assert time.monotonic() < deadline, "the run logged nothing within 60 s"
                    time.sleep(0.01)
                time.sleep(rng.uniform(0.0, 1.5))
            assert child.poll() is None, (child.returncode, child.stderr.read())
            os.kill(child.pid, signal.SIGKILL)
            kills += 1
        finally:
            child.kill()
            child.wait()
        assert child.returncode == -signal.SIGKILL
        torn_writes += bool(list(run.glob(".checkpoint*.tmp")))
        last_step = _check_after_kill(run, last_step)
        assert tree(cwd) == {} and tree(site) == outside, "a file outside the run directory was written"
        assert set(p.name for p in tmp_path.iterdir()) <= {"run", "cwd", "writing"}
    assert last_step > 0, "no checkpoint survived any kill: the kills came too early to test anything"
    if in_writes:  # the kills did land inside writes: half-written temporary files were left behind
        assert torn_writes >= KILLS_PER_TEST // 3, torn_writes
    target = last_step + 300
    final = subprocess.run([sys.executable, "-m", "rlf.cli.commands", "train", "--resume", str(run), "--steps", str(target),
                            "--no-progress"], cwd=cwd, env=child_env(site), capture_output=True, text=True,
                           timeout=120)
    assert final.returncode == 0, final.stderr
    assert not list(run.glob("*.tmp")) and not list(run.glob(".*.tmp"))
    state = ckpt.load(run / "checkpoint.rlf")
    assert state["counters"]["env_steps"] == target
    assert_history_consistent(run, upto=target)
    assert int(float(read_csv(run / "episodes.csv")[1][-1]["episode"])) == state["counters"]["episodes"]


def test_kill_9_at_random_points_of_training_then_resume(site, tmp_path):
    _kill_loop(tmp_path, site, in_writes=False, seed=12)


def test_kill_9_inside_checkpoint_writes_then_resume(site, tmp_path):
    _kill_loop(tmp_path, site, in_writes=True, seed=1212)

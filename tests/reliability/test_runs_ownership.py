"""Run directories are owned: never silently reused, locked while a run writes them, validated."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from fault_support import assert_history_consistent, assert_one_line_error, child_env, make_site, rlf, tree

from rlf.errors import RunDirError
from rlf.storage import checkpoint as ckpt

TRAIN = ("train", "tabular-q", "--env", "line", "--no-progress", "--set", "log_interval=20")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("site"))


def test_a_run_directory_holding_a_run_is_refused_unless_resume_or_overwrite(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, "--steps", "300", "--run-dir", str(run), site=site).returncode == 0
    before = {name: (run / name).read_bytes() for name in ("run.json", "checkpoint.rlf", "metrics.csv")}
    refused = rlf(*TRAIN, "--steps", "64", "--run-dir", str(run), site=site)
    assert_one_line_error(refused, "already holds a run", f"--resume {run}", "--overwrite")
    assert {name: (run / name).read_bytes() for name in before} == before   # nothing lost

    (run / "notes.txt").write_text("mine")
    replaced = rlf(*TRAIN, "--steps", "64", "--run-dir", str(run), "--overwrite", site=site)
    assert replaced.returncode == 0, replaced.stderr
    assert ckpt.load(run / "checkpoint.rlf")["counters"]["env_steps"] == 64
    assert not (run / "checkpoint-1.rlf").exists()      # the replaced run's copies went with it
    assert (run / "notes.txt").read_text() == "mine"     # files rlf did not write are kept
    assert_history_consistent(run, upto=64)
    assert_one_line_error(rlf("train", "--resume", str(run), "--overwrite", site=site), "--overwrite")


def test_a_second_writer_is_refused_with_the_holder_named(site, tmp_path):
    run = tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "rlf.cli.commands", *TRAIN, "--steps", "100000000",
                              "--set", "checkpoint_interval=2000", "--run-dir", str(run)],
                             env=child_env(site), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (run / "checkpoint.rlf").is_file():
            assert first.poll() is None, first.stderr.read()
            assert time.monotonic() < deadline, "the first run wrote no checkpoint in 60 s"
            time.sleep(0.1)
        holder = f"pid {first.pid} on {socket.gethostname()}"
        assert_one_line_error(rlf(*TRAIN, "--steps", "50", "--run-dir", str(run), "--overwrite", site=site),
                              "in use by", holder, "started")
        assert_one_line_error(rlf("train", "--resume", str(run), "--steps", "10000000000", site=site),
                              "in use by", holder)
        assert first.poll() is None    # the first run goes on undisturbed
    finally:
        first.kill()
        first.wait()
    # Once the holder is gone (even by SIGKILL) the lock is free: the kernel released it.
    resumed = rlf("train", "--resume", str(run), "--steps", str(_steps(run) + 100), site=site)
    assert resumed.returncode == 0, resumed.stderr
    assert_history_consistent(run)


def _steps(run) -> int:
    return int(ckpt.load(run / "checkpoint.rlf")["counters"]["env_steps"])


@pytest.mark.parametrize("case", ["empty", "blank", "file", "under-a-file", "not-writable", "too-long"])
def test_bad_run_directories_are_one_line_and_write_nothing(site, tmp_path, case):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "a-file").write_text("x")
    value, fragment = {
        "empty": ("", "run_dir: must not be empty"),
        "blank": ("  ", "run_dir: must not be empty"),
        "file": (str(cwd / "a-file"), "is a file"),
        "under-a-file": (str(cwd / "a-file" / "run"), "a file"),
        # /proc refuses new directories even to root, where permission bits would not
        "not-writable": ("/proc/rlf-test-run", "cannot create run directory"),
        "too-long": ("r" * 300, "long"),
    }[case]
    before = tree(cwd)
    assert_one_line_error(rlf(*TRAIN, "--steps", "10", "--run-dir", value, site=site, cwd=cwd), fragment)
    assert tree(cwd) == before


def test_training_a_loaded_checkpoint_file_never_writes_to_the_run_dir_stored_in_it(site, tmp_path, monkeypatch,
                                                                                  registry):
    import rlf

    victim = tmp_path / "victim"
    original = rlf.make("tabular-q", "line", overrides=["steps=120", "progress=false", f"run_dir='{victim}'"],
                        registry=registry)
    original.train()
    shared = original.save(tmp_path / "shared.rlf")
    assert ckpt.load(shared)["config"]["run"]["run_dir"] == str(victim)
    untouched = {p: p.read_bytes() for p in victim.iterdir() if p.is_file()}

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    again = rlf.load(shared, registry=registry)
    assert again.run_dir != victim and again.run_dir.parts[0] == "runs"
    again.train(steps=200)
    assert {p: p.read_bytes() for p in victim.iterdir() if p.is_file()} == untouched
    assert ckpt.load(cwd / again.run_dir / "checkpoint.rlf")["counters"]["env_steps"] == 200
    explicit = rlf.load(shared, registry=registry, overrides=[f"run_dir='{tmp_path / 'mine'}'"])
    assert explicit.run_dir == tmp_path / "mine"


def test_stale_temporary_files_of_killed_writes_are_cleaned_on_the_next_start(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, "--steps", "100", "--run-dir", str(run), site=site).returncode == 0
    # named as tempfile.mkstemp names rlf's atomic writes (8 characters of [a-z0-9_]), or a CSV rewrite's
    stale = [run / ".checkpoint.rlf.k1ll3d_0.tmp", run / ".run.json.x8x8x8x8.tmp", run / "metrics.csv.tmp"]
    for path in stale:
        path.write_bytes(b"partial")
    # a user's files that merely look like them: another token than mkstemp's is not a write of rlf's
    keep = [run / "notes.tmp", run / ".metrics.csv.notes.tmp", run / ".checkpoint.rlf.x.tmp",
            run / ".checkpoint.rlf.ABCDEFGH.tmp", run / ".run.json.toolong123.tmp"]
    for path in keep:
        path.write_text("not ours")
    assert rlf("train", "--resume", str(run), "--steps", "200", site=site).returncode == 0
    assert not any(path.exists() for path in stale)
    assert all(path.read_text() == "not ours" for path in keep)
    assert rlf(*TRAIN, "--steps", "64", "--run-dir", str(run), "--overwrite", site=site).returncode == 0
    assert all(path.read_text() == "not ours" for path in keep)


def test_keep_checkpoints_keeps_the_previous_ones_loadable(site, tmp_path):
    run = tmp_path / "run"
    result = rlf(*TRAIN, "--steps", "500", "--set", "checkpoint_interval=100", "--set", "keep_checkpoints=3",
                 "--run-dir", str(run), site=site)
    assert result.returncode == 0, result.stderr
    steps = [ckpt.load(run / name)["counters"]["env_steps"]
             for name in ("checkpoint.rlf", "checkpoint-1.rlf", "checkpoint-2.rlf")]
    assert steps == sorted(steps, reverse=True) and steps[0] == 500 and len(set(steps)) == 3
    assert not (run / "checkpoint-3.rlf").exists()
    weights = ckpt.load(run / "checkpoint-1.rlf")["strategy"]["agent"]["tables"]
    assert all(np.isfinite(np.asarray(v)).all() for rows in weights.values() for _, v in rows)


FORKING_HOLDER = r"""
import os, sys, time
from rlf.storage.lock import RunDirLock
held = RunDirLock(sys.argv[1]).acquire()
if os.fork() == 0:          # an actor-like child that outlives its parent
    time.sleep(30)
    os._exit(0)
print("ready", flush=True)
time.sleep(30)
"""


def test_a_forked_child_never_keeps_the_lock_of_a_parent_killed_with_9(tmp_path):
    """Actor processes are forked; were the lock's descriptor inherited, an actor outliving a parent
    killed with -9 would keep the run directory locked."""
    from rlf.storage.lock import RunDirLock

    holder = subprocess.Popen([sys.executable, "-c", FORKING_HOLDER, str(tmp_path)], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(RunDirError, match="in use by"):
            RunDirLock(tmp_path).acquire()
        holder.kill()
        holder.wait()
        assert subprocess.run(["pgrep", "-s", str(holder.pid)], capture_output=True).stdout.strip(), \
            "the forked child should still be alive for this test to mean anything"
        RunDirLock(tmp_path).acquire().release()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)

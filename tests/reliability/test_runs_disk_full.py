"""A run directory on a filesystem that fills up: one line, exit 2, the last checkpoint kept, resumable."""

from __future__ import annotations

import os
import subprocess

import pytest
from fault_support import assert_history_consistent, assert_one_line_error, make_site, rlf

from rlf.storage import checkpoint as ckpt


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("site"))


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or result.returncode}); "
                    "the full-disk test needs root (or CAP_SYS_ADMIN)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(path, leave: int) -> None:
    """Take all but about ``leave`` bytes of the filesystem."""
    stat = os.statvfs(path.parent)
    path.write_bytes(bytes(stat.f_bavail * stat.f_frsize - leave))


def test_a_full_disk_stops_the_run_with_one_line_and_keeps_the_checkpoint(site, small_disk):
    run = small_disk / "run"
    filler = small_disk / "filler"
    _fill(filler, leave=96 * 1024)
    result = rlf("train", "tabular-q", "--env", "line", "--steps", "100000000", "--no-progress",
                 "--set", "log_interval=4", "--set", "checkpoint_interval=200", "--run-dir", str(run), site=site)
    line = assert_one_line_error(result, "No space left on device", "free some space", f"--resume {run}")
    state = ckpt.load(run / "checkpoint.rlf")
    assert state["counters"]["env_steps"] > 0 and "env step" in line
    assert not list(run.glob(".checkpoint*.tmp"))   # a failed write removes its temporary file
    assert_history_consistent(run, complete=False)
    filler.unlink()    # the user frees space, then continues
    done = state["counters"]["env_steps"] + 100
    resumed = rlf("train", "--resume", str(run), "--steps", str(done), site=site)
    assert resumed.returncode == 0, resumed.stderr
    assert ckpt.load(run / "checkpoint.rlf")["counters"]["env_steps"] == done
    assert_history_consistent(run, upto=done)


def test_a_read_only_run_directory_is_one_line_and_nothing_changes(site, small_disk):
    run = small_disk / "run"
    assert rlf("train", "tabular-q", "--env", "line", "--steps", "100", "--no-progress", "--run-dir", str(run),
               site=site).returncode == 0
    remount = subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], capture_output=True, text=True)
    assert remount.returncode == 0, remount.stderr
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert_one_line_error(rlf("train", "--resume", str(run), "--steps", "200", site=site),
                          "is not writable", "read-only filesystem", "choose another --run-dir")
    assert_one_line_error(rlf("train", "tabular-q", "--env", "line", "--run-dir", str(small_disk / "new"),
                              site=site), "is not writable", "read-only filesystem")
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before

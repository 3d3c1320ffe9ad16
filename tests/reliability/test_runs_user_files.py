"""A run directory is rlf's only as far as rlf recorded writing it: files the user put there are never
deleted or replaced, and nothing is written through a symbolic link out of the run directory."""

from __future__ import annotations

import os

import pytest
from fault_support import assert_history_consistent, assert_one_line_error, make_site, rlf, tree

from rlf.errors import RunDirError
from rlf.storage import checkpoint as ckpt
from rlf.storage import files, lock

TRAIN = ("train", "tabular-q", "--env", "line", "--no-progress", "--set", "log_interval=20")
KEEP3 = ("--set", "checkpoint_interval=100", "--set", "keep_checkpoints=3")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("site"))


def _user_files(run):
    files = {"checkpoint-final.rlf": b"my final", "checkpoint_backup.rlf": b"my backup",
             "notes.csv.tmp": b"my notes", "tensorboard/mine.txt": b"my board"}
    for name, data in files.items():
        (run / name).parent.mkdir(exist_ok=True)
        (run / name).write_bytes(data)
    return files


def _steps(path) -> int:
    return int(ckpt.load(path)["counters"]["env_steps"])


def test_overwrite_removes_only_the_files_rlf_wrote(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, *KEEP3, "--steps", "300", "--run-dir", str(run), site=site).returncode == 0
    assert (run / "checkpoint-2.rlf").is_file()
    old_events = list((run / "tensorboard").iterdir())
    mine = _user_files(run)
    result = rlf(*TRAIN, "--steps", "64", "--run-dir", str(run), "--overwrite", site=site)
    assert result.returncode == 0, result.stderr
    assert {name: (run / name).read_bytes() for name in mine} == mine
    assert not (run / "checkpoint-1.rlf").exists() and not (run / "checkpoint-2.rlf").exists()
    assert not any(path.exists() for path in old_events)
    assert _steps(run / "checkpoint.rlf") == 64
    # the user's files are still kept after the next resume's stale-temp cleanup
    assert rlf("train", "--resume", str(run), "--steps", "128", site=site).returncode == 0
    assert {name: (run / name).read_bytes() for name in mine} == mine
    assert_history_consistent(run, upto=128)


def test_a_new_run_beside_files_rlf_did_not_write_is_refused_and_touches_nothing(site, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint-final.rlf").write_bytes(b"mine")
    (run / ".run.json.x8.tmp").write_bytes(b"mine too")
    (run / "notes.csv.tmp").write_bytes(b"and mine")
    before = tree(run)
    line = assert_one_line_error(rlf(*TRAIN, "--steps", "64", "--run-dir", str(run), site=site),
                                 "files rlf did not write", "checkpoint-final.rlf", "notes.csv.tmp", "--overwrite")
    assert "\n" not in line
    assert tree(run) == before and sorted(os.listdir(run)) == sorted(before)  # not even a lock file
    # --overwrite trains beside them and keeps them, also through a later resume
    assert rlf(*TRAIN, "--steps", "64", "--run-dir", str(run), "--overwrite", site=site).returncode == 0
    assert rlf("train", "--resume", str(run), "--steps", "128", site=site).returncode == 0
    assert (run / ".run.json.x8.tmp").read_bytes() == b"mine too"
    assert (run / "notes.csv.tmp").read_bytes() == b"and mine"
    assert (run / "checkpoint-final.rlf").read_bytes() == b"mine"


@pytest.mark.parametrize("name", ["checkpoint-2.rlf", "checkpoint-1.rlf", "metrics.csv", "eval.csv", "best.json"])
def test_a_user_file_with_a_name_rlf_writes_is_never_replaced(site, tmp_path, name):
    run = tmp_path / "run"
    run.mkdir()
    (run / name).write_bytes(b"mine")
    for extra in ((), ("--overwrite",)):
        assert_one_line_error(rlf(*TRAIN, *KEEP3, "--steps", "300", "--run-dir", str(run), *extra, site=site),
                              name, "did not write", "would replace")
        assert (run / name).read_bytes() == b"mine"


def test_a_run_from_before_the_manifest_resumes_and_overwrite_keeps_user_files(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, *KEEP3, "--steps", "300", "--run-dir", str(run), site=site).returncode == 0
    (run / files.MANIFEST_FILE).unlink()        # as an older rlf left it
    (run / ".checkpoint.rlf.k1ll3d_0.tmp").write_bytes(b"partial")
    mine = _user_files(run)
    resumed = rlf("train", "--resume", str(run), "--steps", "400", site=site)
    assert resumed.returncode == 0, resumed.stderr
    assert _steps(run / "checkpoint.rlf") == 400 and 300 <= _steps(run / "checkpoint-1.rlf") < 400
    assert not (run / ".checkpoint.rlf.k1ll3d_0.tmp").exists()    # rlf's, by its name
    assert {name: (run / name).read_bytes() for name in mine} == mine
    (run / files.MANIFEST_FILE).unlink()
    assert rlf(*TRAIN, "--steps", "64", "--run-dir", str(run), "--overwrite", site=site).returncode == 0
    assert not (run / "checkpoint-2.rlf").exists()
    assert {name: (run / name).read_bytes() for name in mine} == mine


@pytest.mark.parametrize("name", ["metrics.csv", "episodes.csv", "run.json", "checkpoint.rlf"])
def test_a_hard_link_to_a_file_elsewhere_is_refused_and_that_file_is_untouched(site, tmp_path, name):
    run = tmp_path / "run"
    assert rlf(*TRAIN, "--steps", "100", "--run-dir", str(run), site=site).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.link(run / name, elsewhere / name)  # the same file under a second name, outside the run
    before = (elsewhere / name).read_bytes()
    assert_one_line_error(rlf("train", "--resume", str(run), "--steps", "200", site=site),
                          name, "hard-linked", "cp --remove-destination")
    assert (elsewhere / name).read_bytes() == before
    assert_one_line_error(rlf(*TRAIN, "--steps", "100", "--run-dir", str(run), "--overwrite", site=site),
                          name, "hard-linked")
    assert (elsewhere / name).read_bytes() == before
    # a copy in its place (the fix the line names) resumes
    (run / name).unlink()
    (run / name).write_bytes(before)
    assert rlf("train", "--resume", str(run), "--steps", "200", site=site).returncode == 0
    assert (elsewhere / name).read_bytes() == before


# -- symbolic links -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["metrics.csv", "episodes.csv", "eval.csv", "best.json", "run.json",
                                  "tensorboard", "tensorboard/events.out.tfevents.1.host", "data"])
@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_out_of_the_run_directory_is_refused_and_nothing_outside_is_written(site, tmp_path, name,
                                                                                     dangling):
    run = tmp_path / "run"
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "target"
    is_dir = name == "tensorboard"
    if not dangling:
        target.mkdir() if is_dir else target.write_text("env_step,return\n")
    assert rlf(*TRAIN, "--steps", "100", "--set", "eval_interval=50", "--run-dir", str(run),
               site=site).returncode == 0
    link = run / name
    if link.is_dir() and not link.is_symlink():
        for child in link.iterdir():
            child.unlink()
        link.rmdir()
    else:
        link.unlink(missing_ok=True)
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target, target_is_directory=is_dir)
    before = tree(outside)
    checkpoint = (run / "checkpoint.rlf").read_bytes()
    # (a dangling run.json: the directory no longer holds a run to resume, also one line)
    fragments = ("symbolic link", "remove") if (name, dangling) != ("run.json", True) else ()
    assert_one_line_error(rlf("train", "--resume", str(run), "--steps", "200", site=site),
                          name.split("/")[-1], *fragments)
    assert tree(outside) == before and target.exists() == (not dangling)
    assert (run / "checkpoint.rlf").read_bytes() == checkpoint
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / name).parent.mkdir(exist_ok=True)
    (fresh / name).symlink_to(target, target_is_directory=is_dir)
    assert_one_line_error(rlf(*TRAIN, "--steps", "100", "--run-dir", str(fresh), "--overwrite", site=site),
                          name.split("/")[-1])
    assert tree(outside) == before


def test_a_link_planted_after_the_start_is_not_written_through(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside.csv"
    outside.write_text("theirs\n")
    with lock.RunDirLock(run):
        files.open_for_write(run, "metrics.csv").close()  # rlf's own file, then replaced by a link
        (run / "metrics.csv").unlink()
        (run / "metrics.csv").symlink_to(outside)
        with pytest.raises(RunDirError, match="symbolic link"):
            files.open_for_write(run, "metrics.csv")
        (run / "tensorboard").symlink_to(tmp_path, target_is_directory=True)
        with pytest.raises(RunDirError, match="symbolic link"):
            files.TensorBoardFiles(run)
    assert outside.read_text() == "theirs\n"


def test_a_link_inside_the_run_directory_to_a_user_file_is_allowed(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, "--steps", "100", "--run-dir", str(run), site=site).returncode == 0
    (run / "notes.txt").write_text("mine")
    (run / "latest-notes").symlink_to(run / "notes.txt")
    assert rlf("train", "--resume", str(run), "--steps", "200", site=site).returncode == 0
    assert (run / "notes.txt").read_text() == "mine"

"""Resume continues history: rows logged after the checkpoint are cut, a target already reached is refused."""

from __future__ import annotations

import shutil

import pytest
from fault_support import assert_history_consistent, assert_one_line_error, make_site, read_csv, rlf

from rlf.storage import checkpoint as ckpt

TRAIN = ("train", "tabular-q", "--env", "line", "--no-progress", "--set", "log_interval=20",
         "--set", "checkpoint_interval=100")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("site"))


def test_resume_cuts_rows_logged_after_the_checkpoint_before_adding_new_ones(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, "--steps", "200", "--run-dir", str(run), site=site).returncode == 0
    at_200 = (run / "checkpoint.rlf").read_bytes()
    assert rlf("train", "--resume", str(run), "--steps", "300", site=site).returncode == 0
    # What a kill -9 between checkpoints leaves: rows up to step 300, the checkpoint of step 200.
    (run / "checkpoint.rlf").write_bytes(at_200)
    _, rows = read_csv(run / "episodes.csv")
    assert float(rows[-1]["env_step"]) > 200
    result = rlf("train", "--resume", str(run), "--steps", "400", site=site)
    assert result.returncode == 0, result.stderr
    assert_history_consistent(run, upto=400)
    _, metrics = read_csv(run / "metrics.csv")
    assert [float(row["env_step"]) for row in metrics][-1] == 400
    episodes = ckpt.load(run / "checkpoint.rlf")["counters"]["episodes"]
    assert int(float(read_csv(run / "episodes.csv")[1][-1]["episode"])) == episodes


def test_a_step_target_already_reached_is_one_line_and_changes_nothing(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, "--steps", "200", "--run-dir", str(run), site=site).returncode == 0
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    for target in ("200", "150"):
        assert_one_line_error(rlf("train", "--resume", str(run), "--steps", target, site=site),
                              "already at env step 200", "--steps")
    assert_one_line_error(rlf("train", "--resume", str(run), site=site), "already at env step 200")
    after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    assert after == before


def test_a_corrupt_checkpoint_names_the_previous_one(site, tmp_path):
    run = tmp_path / "run"
    assert rlf(*TRAIN, "--steps", "300", "--run-dir", str(run), site=site).returncode == 0
    data = (run / "checkpoint.rlf").read_bytes()
    (run / "checkpoint.rlf").write_bytes(data[: len(data) // 2])
    assert_one_line_error(rlf("train", "--resume", str(run), "--steps", "400", site=site),
                          "corrupt", "checkpoint-1.rlf")
    shutil.copy(run / "checkpoint-1.rlf", run / "checkpoint.rlf")   # what the message says to do
    assert rlf("train", "--resume", str(run), "--steps", "400", site=site).returncode == 0
    assert_history_consistent(run, upto=400)

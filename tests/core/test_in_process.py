"""The Python API as a tuner or a script uses it: one train() per process, the final evaluation returned,
and run directories removed without touching the user's files."""

import csv
import threading

import pytest
from support import TestPlugin

import rlf
from rlf import Callback, ConfigError
from rlf.errors import RunDirError
from rlf.plugins import load_registry


@pytest.fixture(scope="module")
def reg():
    return load_registry(extra_plugins=[("test-plugin", TestPlugin())])


def make(reg, run_dir, *overrides):
    return rlf.make("tabular-q", "line", registry=reg,
                    overrides=["progress=false", f"run_dir='{run_dir}'", "seed=3", *overrides])


class Hold(Callback):
    """Keeps its train() inside the loop until released."""

    def __init__(self):
        self.inside, self.release = threading.Event(), threading.Event()

    def on_step(self, trainer, result):
        self.inside.set()
        assert self.release.wait(60)


def test_a_second_train_in_another_thread_is_refused_and_the_first_is_unharmed(reg, tmp_path):
    hold, errors = Hold(), []
    first = make(reg, tmp_path / "first", "steps=200")

    def train_first():
        try:
            first.train(callbacks=[hold])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=train_first)
    thread.start()
    try:
        assert hold.inside.wait(60)
        second = make(reg, tmp_path / "second", "steps=200")
        with pytest.raises(ConfigError, match=r"^train\(\) is already running in this process: .* run them in "
                                              r"processes instead"):
            second.train()
        assert not (tmp_path / "second").exists()  # refused before anything was written
    finally:
        hold.release.set()
        thread.join(60)
    assert first.counters["env_steps"] == 200 and not errors
    # once the first has ended, the same process trains again, and reproduces the first from its seed
    again = make(reg, tmp_path / "again", "steps=200")
    again.train()
    assert (tmp_path / "again" / "episodes.csv").read_text() == (tmp_path / "first" / "episodes.csv").read_text()


def test_a_train_that_fails_frees_the_process_for_the_next(reg, tmp_path):
    class Fail(Callback):
        def on_step(self, trainer, result):
            raise RuntimeError("boom")

    with pytest.raises(Exception, match="boom"):
        make(reg, tmp_path / "a", "steps=200").train(callbacks=[Fail()])
    assert make(reg, tmp_path / "b", "steps=200").train()["env_step"] == 200


def test_train_returns_the_final_evaluation_when_one_is_configured(reg, tmp_path):
    plain = make(reg, tmp_path / "plain", "steps=1000").train()
    assert not any(key.startswith("eval/") for key in plain)
    algo = make(reg, tmp_path / "evaluated", "steps=1000", "eval_interval=500", "eval_episodes=3")
    summary = algo.train()
    with open(tmp_path / "evaluated" / "eval.csv") as handle:
        last = list(csv.DictReader(handle))[-1]
    assert int(last["env_step"]) == 1000
    assert summary["eval/return"] == pytest.approx(float(last["return"]))
    assert summary["eval/episodes"] == 3


def test_remove_run_removes_only_rlf_s_files(reg, tmp_path):
    run = tmp_path / "run"
    make(reg, run, "steps=200").train()
    assert rlf.remove_run(run) is True and not run.exists()
    kept = tmp_path / "kept"
    make(reg, kept, "steps=200").train()
    (kept / "notes.txt").write_text("mine")
    assert rlf.remove_run(kept) is False
    assert sorted(p.name for p in kept.iterdir()) == ["notes.txt"]
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("a,b\n1,2\n")
    with pytest.raises(RunDirError, match="is not an rlf run directory"):
        rlf.remove_run(foreign)
    assert (foreign / "data.csv").exists()
    with pytest.raises(RunDirError, match="does not exist"):
        rlf.remove_run(tmp_path / "nowhere")


def test_remove_run_refuses_a_run_that_is_training(reg, tmp_path):
    hold = Hold()
    algo = make(reg, tmp_path / "busy", "steps=200")
    thread = threading.Thread(target=lambda: algo.train(callbacks=[hold]))
    thread.start()
    try:
        assert hold.inside.wait(60)
        with pytest.raises(RunDirError, match="is in use by"):
            rlf.remove_run(tmp_path / "busy")
    finally:
        hold.release.set()
        thread.join(60)
    assert (tmp_path / "busy" / "checkpoint.rlf").exists()


def test_remove_run_takes_what_a_killed_start_left_unrecorded_but_not_look_alikes(reg, tmp_path):
    run = tmp_path / "run"
    make(reg, run, "steps=200").train()
    # an event file TensorBoard made before rlf recorded it, a temporary file of a write to run.json
    (run / "tensorboard" / "events.out.tfevents.1796650000.host.1.0").write_bytes(b"partial")
    (run / ".run.json.k1ll3d_0.tmp").write_bytes(b"partial")
    assert rlf.remove_run(run) is True and not run.exists()
    again = tmp_path / "again"
    make(reg, again, "steps=200").train()
    (again / ".metrics.csv.notes.tmp").write_text("mine")  # looks like a temporary file; is not rlf's
    assert rlf.remove_run(again) is False
    assert [p.name for p in again.iterdir()] == [".metrics.csv.notes.tmp"]


def test_remove_run_takes_a_directory_a_process_was_killed_in_as_it_took_it(tmp_path):
    from rlf.storage.files import LOCK_FILE, MANIFEST_FILE, OWNER_FILE

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / LOCK_FILE).write_text("")
    (taken / OWNER_FILE).write_text('{"pid": 1}')
    (taken / f".{MANIFEST_FILE}.r4zteo3e.tmp").write_text("{")  # its first manifest write, cut short
    assert rlf.remove_run(taken) is True and not taken.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RunDirError, match="is not an rlf run directory"):
        rlf.remove_run(empty)  # nothing says rlf ever had it
    assert empty.is_dir()

"""SIGTERM (``kill``, ``docker stop``, a Kubernetes eviction) stops training as Ctrl-C does, in the process
that trains; processes it forked die of the signal as they would without rlf, with no traceback, and leave
Ctrl-C to it. While a strategy's step or a callback (a logger) runs, either signal waits for it to return;
a second one does not wait. (Exact resumes after a stop: tests/reliability/test_exact_resume_signals.py.)"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import pytest

import rlf
from rlf import Callback
from rlf.logging.callbacks import PeriodicEval
from rlf.storage import checkpoint as ckpt
from rlf.training.trainer import Interrupted, sigterm_as_interrupt


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler, whatever this process started with: a test run started as a background
    job or under nohup inherits SIGINT ignored, and rlf leaves an ignored SIGINT ignored."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture
def ignored_sigint():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, before)


def _wait_for_sigterm() -> None:
    time.sleep(60)


def test_sigterm_interrupts_the_trainer_and_a_forked_child_dies_of_it_quietly(capfd):
    before = signal.getsignal(signal.SIGTERM)
    with sigterm_as_interrupt():
        child = mp.get_context("fork").Process(target=_wait_for_sigterm)
        child.start()
        time.sleep(0.5)  # past the fork: the child runs with the inherited handler
        child.terminate()
        child.join(30)
        assert child.exitcode == -signal.SIGTERM  # with the handler's KeyboardInterrupt it would exit 1
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler runs between bytecodes, at the latest here
    assert signal.getsignal(signal.SIGTERM) is before
    assert "Traceback" not in capfd.readouterr().err


class _SignalsItself(Callback):
    """At its first metrics row, sends itself ``signals`` and then works on: a held signal lets the work
    finish (``finished``), one raised at once cuts it short."""

    def __init__(self, *signals: int):
        self.signals, self.finished, self.rows = signals, False, 0

    def on_log(self, trainer, metrics):
        self.rows += 1
        if self.rows > 1:
            return
        for signum in self.signals:
            os.kill(os.getpid(), signum)
        time.sleep(0.5)  # where a library's lock or queue would be in the middle of its work
        self.finished = True


def _make(registry, tmp_path, steps=2048):
    return rlf.make("tabular-q", "line", registry=registry, overrides=[
        "progress=false", f"run_dir='{tmp_path}'", "seed=3", f"steps={steps}", "log_interval=64",
        "checkpoint_interval=0"])


def _train(registry, tmp_path, callback):
    algo = _make(registry, tmp_path)
    with pytest.raises(Interrupted, match="interrupted at env step 64;"):
        algo.train(callbacks=[callback])
    return ckpt.load(tmp_path / "checkpoint.rlf")["counters"]["env_steps"]


def test_sigterm_in_a_callback_is_held_until_the_callback_returns(registry, tmp_path):
    callback = _SignalsItself(signal.SIGTERM)
    with sigterm_as_interrupt():
        assert _train(registry, tmp_path, callback) == 64
    assert callback.finished and callback.rows == 1  # it ran to its end, and no step came after


def test_ctrl_c_in_a_callback_is_held_too_and_python_s_handler_comes_back(registry, tmp_path, python_sigint):
    callback = _SignalsItself(signal.SIGINT)
    assert _train(registry, tmp_path, callback) == 64
    assert callback.finished and callback.rows == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_sigint_stays_ignored(registry, tmp_path, ignored_sigint):
    # as a shell starts a background job or nohup: a Ctrl-C meant for the terminal is not this run's
    callback = _SignalsItself(signal.SIGINT)
    algo = _make(registry, tmp_path, steps=256)
    algo.train(callbacks=[callback])
    assert algo.counters["env_steps"] == 256 and callback.finished
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_second_signal_interrupts_a_callback_at_once(registry, tmp_path):
    callback = _SignalsItself(signal.SIGTERM, signal.SIGTERM)
    with sigterm_as_interrupt():
        assert _train(registry, tmp_path, callback) == 64  # the checkpoint is still written
    assert not callback.finished


def test_an_evaluation_is_interrupted_at_once(registry, tmp_path):
    played = []

    def evaluate(episodes):  # episodes that would take a while
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
        played.append(episodes)
        return {"return": 1.0}

    with sigterm_as_interrupt():
        assert _train(registry, tmp_path, PeriodicEval(64, 3, evaluate)) == 64
    assert played == []


def _signal_at_step(monkeypatch, step: int, *signals: int) -> None:
    """Send ``signals`` to this process inside the strategy's step, at its ``step``-th vector step."""
    from rlf.training.episodes import EpisodeTracker

    update, count = EpisodeTracker.update, [0]

    def signalling(self, *args, **kwargs):
        rows = update(self, *args, **kwargs)
        count[0] += 1
        if count[0] == step:
            for signum in signals:
                os.kill(os.getpid(), signum)
                time.sleep(0.05)  # the handler runs between bytecodes, at the latest here
        return rows

    monkeypatch.setattr(EpisodeTracker, "update", signalling)


def test_a_signal_inside_a_step_is_held_until_the_step_ends(registry, tmp_path, monkeypatch, python_sigint):
    # an off-policy chunk is 64 steps of the one env: a signal at its 10th stops the run at its end
    _signal_at_step(monkeypatch, 10, signal.SIGINT)
    algo = _make(registry, tmp_path)
    with pytest.raises(Interrupted, match=r"^interrupted at env step 64; checkpoint saved, continue with"):
        algo.train()
    assert ckpt.load(tmp_path / "checkpoint.rlf")["counters"]["env_steps"] == 64


def test_a_second_signal_inside_a_step_stops_at_once_and_says_the_resume_may_differ(registry, tmp_path,
                                                                                      monkeypatch):
    _signal_at_step(monkeypatch, 10, signal.SIGTERM, signal.SIGTERM)
    algo = _make(registry, tmp_path)
    with sigterm_as_interrupt(), pytest.raises(Interrupted, match=r"^interrupted at env step 0; checkpoint saved "
                                                                  r"\(a second Ctrl-C or SIGTERM did not wait"):
        algo.train()
    assert ckpt.load(tmp_path / "checkpoint.rlf")["counters"]["env_steps"] == 0


def _exit_with_sigint_disposition() -> None:
    os._exit(0 if signal.getsignal(signal.SIGINT) is signal.SIG_IGN else 1)


class _Forks(Callback):
    def __init__(self):
        self.exitcode = None

    def on_start(self, trainer):
        child = mp.get_context("fork").Process(target=_exit_with_sigint_disposition)
        child.start()
        child.join(60)
        self.exitcode = child.exitcode


def test_a_child_forked_while_training_leaves_ctrl_c_to_the_training_process(registry, tmp_path, python_sigint):
    # a terminal's Ctrl-C reaches the whole process group: an actor killed by it could not help finish the step
    forks = _Forks()
    _make(registry, tmp_path, steps=64).train(callbacks=[forks])
    assert forks.exitcode == 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

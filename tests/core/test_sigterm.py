"""SIGTERM (``kill``, ``docker stop``, a Kubernetes eviction) stops training as Ctrl-C does, in the process
that trains; processes it forked die of the signal as they would without rlf, with no traceback."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time

import pytest

from rlf.training.trainer import sigterm_as_interrupt


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

"""rlf.training.actors.StopFlag, the stop request of the off-policy actors, APPO's actors and A3C's workers:
a child killed while it reads the flag cannot block the parent that sets it (multiprocessing.Event
could: a child killed inside is_set() held its lock for good, and an APPO run hung in close())."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time

from rlf.training.actors import StopFlag

CTX = mp.get_context("fork")


def spin(flag) -> None:
    while not flag.is_set():
        pass


def test_a_child_killed_while_reading_the_flag_never_blocks_setting_it():
    # A child spinning on multiprocessing.Event.is_set() is inside its lock most of the time: killed
    # there, it left the parent's set() blocked in 7 of 10 tries on this machine.
    for _ in range(5):
        flag = StopFlag(CTX)
        child = CTX.Process(target=spin, args=(flag,), daemon=True)
        child.start()
        time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        setter = threading.Thread(target=flag.set, daemon=True)
        setter.start()
        setter.join(5)
        assert not setter.is_alive(), "set() blocked after a reader was killed"
        assert flag.is_set()


def test_a_running_child_sees_the_stop_and_exits():
    flag = StopFlag(CTX)
    child = CTX.Process(target=spin, args=(flag,), daemon=True)
    child.start()
    time.sleep(0.05)
    assert child.is_alive()
    flag.set()
    child.join(10)
    assert child.exitcode == 0

"""Stop signals while training: Ctrl-C (SIGINT) and SIGTERM (``kill``, ``docker stop``, a Kubernetes
eviction) end a run with a checkpoint that resumes exactly, so the first one never cuts the Trainer's
work or a strategy's step short: it is held, and the run stops at the next point where its state is
whole (see ``_Shield``). A second signal is not held."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any


class _Shield:
    """Where an interrupt may land. Python raises KeyboardInterrupt between any two bytecodes: one raised
    inside a library's thread or queue code (tensorboardX's writer, a multiprocessing queue's feeder) can leave
    a lock held or a wake-up lost (measured: 1 run in ~100 then hung for good in the logger's close()), and
    one raised inside a rollout or an update leaves a state no checkpoint can continue exactly (the envs a
    step ahead of the counters, the episodes that ended in the rollout never logged). So while the Trainer
    runs a step and what follows it (callbacks, loggers, checkpoints) a first signal is only noted
    (``pending``); the Trainer stops at the step's end, and a strategy that can keep unfinished work in its
    checkpoint may stop sooner (``stop_pending``). A second signal while one is held is raised at once, so a
    stuck step or callback can still be interrupted."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.depth = 0
        self.pending = False
        self.cut_short = False
        """An ``interruptible`` stretch was ended by a stop (the stop stands, held again)."""

    def interrupt(self, signum: int, frame: Any) -> None:
        if self.depth and not self.pending:
            self.pending = True
            return
        self.pending = False
        raise KeyboardInterrupt

    def __enter__(self) -> None:
        self.depth += 1

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        self.depth -= 1
        if self.depth == 0 and self.pending and kind is None:
            self.pending = False
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def lifted(self):
        """Inside a held block, a stretch where a signal is raised at once again (and one held is raised
        on entry). Where the block is held, a stop that ends the stretch is held again afterwards
        (``cut_short``): the rest of the block still runs, so what follows a cut evaluation (the metrics
        row, the checkpoint) is as a run never stopped would have it."""
        depth, self.depth = self.depth, 0
        try:
            if self.pending:
                self.pending = False
                raise KeyboardInterrupt
            yield
        except KeyboardInterrupt:
            if depth:
                self.pending = self.cut_short = True
            raise
        finally:
            self.depth = depth

    def take_cut(self) -> bool:
        """True once after a held ``lifted`` stretch was cut short by a stop."""
        cut, self.cut_short = self.cut_short, False
        return cut

    @contextlib.contextmanager
    def handling(self):
        """Around the code that handles an interrupt or ends the run: a signal is held, then dropped (the
        run is stopping anyway; a second one still interrupts at once)."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0:
                self.pending = False
                self.cut_short = False


# Signal handlers run in the main thread only, so one shield per process serves every Trainer.
SHIELD = _Shield()


def _after_fork_in_child() -> None:
    """A forked child (an actor, an A3C worker) never returns through the blocks it was forked inside: it
    starts unshielded. A Ctrl-C in a terminal reaches it too (the whole process group gets SIGINT), but
    stopping is the training process's: it finishes its step with the child's help, then stops the child."""
    SHIELD.reset()
    if signal.getsignal(signal.SIGINT) == SHIELD.interrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


os.register_at_fork(after_in_child=_after_fork_in_child)


def stop_pending() -> bool:
    """A stop signal arrived and is held: the run stops at the end of the current strategy step, or at an
    earlier point where the strategy can keep its unfinished work (``TrainStrategy.stop_requested``)."""
    return SHIELD.pending


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While inside: SIGTERM is a stop signal in this process, as Ctrl-C is (held while the Trainer's
    own code or a strategy's step runs, see ``_Shield``), so a `kill` saves a checkpoint as Ctrl-C does.
    Processes forked meanwhile (env workers, a plugin's actors) inherit the handler; in them SIGTERM keeps
    its default, else every child a plugin stops with terminate() would print a KeyboardInterrupt traceback."""
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
            return
        SHIELD.interrupt(signum, frame)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def sigint_shielded():
    """Ctrl-C under the same rule as SIGTERM while training, where Python's own handler is in place (a host
    with its own, a notebook kernel say, keeps it) and this is the main thread (the only one that may set one)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    signal.signal(signal.SIGINT, SHIELD.interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)

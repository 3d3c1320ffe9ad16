"""Local actor processes for the ``actor-learner`` strategy: forked, each running the core's
``ActorWorker`` (own envs, own agent copy) and sending fixed-length chunks to the learner.

Why not the off-policy strategy's actors: they share one report queue, which a process killed while
writing to it can leave unusable for the others, so a lost actor must stop the run. Here every actor
has its own pipe for chunks and its own queue for weights: an actor that dies takes only its own
channels with it, and the pool drops it and (within ``actor_restarts``) starts another.

Flow control. A chunk is sent on a pipe, so an actor that finished a chunk waits until the learner
reads it: at most one finished chunk per actor waits for the learner, and an actor is never more
than one chunk ahead of its last weights. The learner sends an actor the newest weights right after
taking its chunk; the actor loads whatever is newest in its queue before each chunk. So actors keep
collecting while the learner updates, with weights a few updates old.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

from rlf.envs import exit_description
from rlf.training.actors import ActorJob, ActorWorker, StopFlag

POLL_S = 0.5
RESTART_SEED_STRIDE = 15_485_863
"""Seed distance between an actor and its replacements: beyond any actor's seed range."""


class ActorsLost(Exception):
    """No actor is left and no restart is left to replace one; the message says which were lost."""


@dataclass
class _Actor:
    index: int
    seed: int
    process: Any
    reader: Any
    inbox: Any
    owed: bool = False
    """It sent a chunk since its last weights: the next ``collect`` sends it the newest ones."""


class LocalActorPool:
    """``job.count`` forked actors (an ``rlf.training.actors.ActorPool``) that lose and replace actors
    instead of failing: ``lost`` and ``joined`` count them, ``restarts`` is ``joined`` (the protocol's name)."""

    def __init__(self, job: ActorJob, worker_init, *, restart_budget: int, timeout: float, label: str):
        self.job = job
        self.worker_init = worker_init
        self.restart_budget = restart_budget
        self.timeout = timeout
        self.label = label
        self.lost = 0
        self.joined = 0
        self.reasons: list[str] = []
        self._weights = job.weights
        self._ctx = mp.get_context("fork")  # actors get the builders and the job without pickling them
        self._stop = StopFlag(self._ctx)
        self._beats = self._ctx.Array("d", [time.monotonic()] * job.count, lock=False)
        self._rotation = 0
        self._next_check = 0.0
        self.actors: dict[int, _Actor] = {}
        for index, seed in enumerate(job.seeds):
            self._start(index, seed)

    @property
    def restarts(self) -> int:
        return self.joined

    @property
    def alive(self) -> int:
        return len(self.actors)

    def pids(self) -> dict[int, int]:
        return {index: actor.process.pid for index, actor in self.actors.items()}

    def _start(self, index: int, seed: int) -> None:
        reader, writer = self._ctx.Pipe(duplex=False)
        inbox = self._ctx.Queue()
        inbox.put(self._weights)
        self._beats[index] = time.monotonic()
        # the other actors' read ends: the child closes its copies, or an actor whose reader this
        # process closes at teardown would not see its pipe break while another child holds one open
        foreign = [actor.reader for actor in self.actors.values()]
        process = self._ctx.Process(target=_actor_main, name=f"rlf-appo-actor-{index}", daemon=True,
                                    args=(self.job, self.worker_init, index, seed, writer, inbox, self._stop,
                                          self._beats, foreign))
        process.start()
        writer.close()  # only the actor writes: its death must read as end-of-file here
        self.actors[index] = _Actor(index, seed, process, reader, inbox)

    # -- ActorPool -------------------------------------------------------------------------------
    def push(self, weights: Any) -> None:
        self._weights = weights

    def collect(self) -> tuple[int, dict[str, Any]]:
        for actor in self.actors.values():
            if actor.owed:
                actor.inbox.put(self._weights)
                actor.owed = False
        while True:
            if not self.actors:
                raise ActorsLost(self._lost_text())
            if time.monotonic() >= self._next_check:
                self._check_health()
                self._next_check = time.monotonic() + POLL_S
                if not self.actors:
                    continue
            readers = {actor.reader: actor for actor in self.actors.values()}
            ready = wait(list(readers), timeout=POLL_S)
            if not ready:
                continue
            # rotate who is read first, so an actor that is always ready cannot starve the others
            ready.sort(key=lambda reader: (readers[reader].index - self._rotation) % len(self._beats))
            self._rotation = (self._rotation + 1) % len(self._beats)
            for reader in ready:
                actor = readers[reader]
                try:
                    kind, payload = reader.recv()
                except (EOFError, OSError):
                    actor.process.join(timeout=POLL_S)
                    self._lose(actor, exit_description(actor.process.exitcode)
                               if actor.process.exitcode is not None else "closed its pipe")
                    continue
                if kind == "error":
                    self._lose(actor, payload)
                    continue
                actor.owed = True
                return actor.index, payload

    def close(self) -> None:
        self._stop.set()
        for actor in list(self.actors.values()):
            actor.reader.close()  # an actor blocked sending a chunk gets a broken pipe and exits
        deadline = time.monotonic() + 10.0
        for actor in list(self.actors.values()):
            actor.process.join(timeout=max(deadline - time.monotonic(), 0.0))
            if actor.process.is_alive():
                actor.process.terminate()
                actor.process.join(timeout=5)
            self._close_inbox(actor)
        self.actors = {}

    # -- faults ----------------------------------------------------------------------------------
    def _check_health(self) -> None:
        now = time.monotonic()
        for actor in list(self.actors.values()):
            if actor.process.exitcode is not None:
                if actor.reader.poll():  # its last words (an error report, a chunk) come first
                    continue
                self._lose(actor, exit_description(actor.process.exitcode))
            elif now - self._beats[actor.index] > self.timeout:
                actor.process.kill()  # stopped or stuck: it would never answer the stop request
                actor.process.join(timeout=POLL_S)
                self._lose(actor, f"made no progress for {self.timeout:g} s (run.env_timeout)")

    def _lose(self, actor: _Actor, reason: str) -> None:
        del self.actors[actor.index]
        actor.reader.close()
        if actor.process.is_alive():
            actor.process.kill()
        actor.process.join(timeout=POLL_S)
        self._close_inbox(actor)
        self.lost += 1
        text = f"actor {actor.index} (pid {actor.process.pid}) {reason}"
        self.reasons.append(text)
        if self.joined < self.restart_budget:
            self.joined += 1
            seed = actor.seed + RESTART_SEED_STRIDE * self.joined
            print(f"{self.label}: {text}; starting a replacement ({self.joined} of {self.restart_budget} "
                  "restarts used)", file=sys.stderr)
            self._start(actor.index, seed)
        else:
            print(f"{self.label}: {text}; no restarts left (algo.actor_restarts={self.restart_budget}), "
                  f"continuing with {len(self.actors)} actor{'' if len(self.actors) == 1 else 's'}", file=sys.stderr)

    def _lost_text(self) -> str:
        last = self.reasons[-1] if self.reasons else "no actor started"
        return (f"all actors were lost ({self.lost} lost, {self.joined} replaced, algo.actor_restarts="
                f"{self.restart_budget}); the last: {last}")

    @staticmethod
    def _close_inbox(actor: _Actor) -> None:
        actor.inbox.cancel_join_thread()  # weights nobody will read must not hold this process at exit
        actor.inbox.close()


IN_FLIGHT = 2
"""Chunks an actor may have sent that the learner has not yet answered (with weights): one waiting to
be read while the next is collected. A small chunk fits in the pipe's buffer, so the pipe alone would
let an actor run many chunks ahead on ever older weights."""


def _answers(inbox, running, beats, index: int, outstanding: int) -> tuple[Any, int]:
    """The newest weights in ``inbox`` (None if none came) and how many answers that was; waits while
    ``outstanding`` chunks are unanswered at ``IN_FLIGHT``."""
    latest, count = None, 0
    while True:
        try:
            if outstanding - count >= IN_FLIGHT:
                # waiting for the learner is no hang, but a process stopped here must still be seen
                # as one: stamped on every poll
                beats[index] = time.monotonic()
                latest = inbox.get(timeout=POLL_S)
            else:
                latest = inbox.get_nowait()
            count += 1
        except queue.Empty:
            if outstanding - count < IN_FLIGHT or not running():
                return latest, count


def _actor_main(job: ActorJob, worker_init, index: int, seed: int, writer, inbox, stop, beats, foreign) -> None:
    # Ctrl-C reaches the whole process group: the learner checkpoints and stops the actors
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for reader in foreign:
        reader.close()
    parent = os.getppid()
    try:
        worker_init()
        worker = ActorWorker(job, seed)
        try:
            worker.load(inbox.get(timeout=60))
            outstanding = 0

            def running() -> bool:
                return not stop.is_set() and os.getppid() == parent

            while running():
                weights, answered = _answers(inbox, running, beats, index, outstanding)
                outstanding -= answered
                if weights is not None:
                    worker.load(weights)
                beats[index] = time.monotonic()
                chunk = worker.chunk()
                # waiting for the learner to read is no hang (a chunk larger than the pipe's buffer
                # waits for the learner's recv)
                beats[index] = math.inf
                writer.send(("chunk", chunk))
                beats[index] = time.monotonic()
                outstanding += 1
        finally:
            worker.close()
    except (BrokenPipeError, EOFError):  # the learner closed the pipe: the run is over
        return
    except Exception as exc:  # noqa: BLE001 - reported to the learner, which drops this actor
        try:
            writer.send(("error", f"failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"))
        except OSError:
            pass

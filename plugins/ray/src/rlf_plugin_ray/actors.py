"""Off-policy actors on Ray: ``algo.actors = N`` with ``vector = "ray"`` runs the N actors of the
off-policy strategy (DQN's, SAC's, tabular Q's) as Ray actors, anywhere in the cluster.

Each Ray actor runs the core's ``ActorWorker`` (its own envs and agent copy), the same code the
local actor processes run, and answers one ``chunk`` call with one chunk of transitions through
Ray's object store. Weights travel through the object store too: each push is one ``ray.put``, and
the object reference rides along with an actor's next ``chunk`` call (only for actors that have not
seen it), so Ray ships it once per node and every actor on the node reads that copy.

Overlap. Outside lockstep each actor has ``IN_FLIGHT`` calls queued, so it starts its next chunk as
soon as one is done; the learner takes whichever chunk is ready first (in rotating order, so no actor
starves). With ``algo.actor_lockstep = true`` the learner takes actor 0's chunk, then 1's, ..., and an
actor's next call is sent when its previous chunk was taken: the transitions are then exactly those
of the local actors in lockstep (the same seeds, the same weights at the same points).

Faults. A dead actor (its process or its node) is restarted by Ray up to ``collector.max_restarts``
times; its chunks in flight are lost (their transitions were never learned from), it starts fresh
episodes from a seed not used before with the learner's latest weights, and ``actor_restarts``
counts it in the metrics. Past ``max_restarts`` the run stops with one ``EnvWorkerError`` line; the
last checkpoint is intact.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from rlf.errors import EnvWorkerError
from rlf.training.actors import ActorJob, ActorWorker

from .collector import (
    RESTART_SEED_STRIDE,
    _first_line,
    _free_resources,
    _owned,
    actor_options,
    close_actors,
    connect,
    resolve_address,
    revive,
)
from .config import RayCollectorConfig

IN_FLIGHT = 2
"""Chunk calls queued per actor outside lockstep: one running, one to start the moment it is done."""


class ActorHost:
    """One Ray actor: an ``ActorWorker`` started by ``start`` and stepped one chunk per call."""

    def __init__(self, job: ActorJob, niceness: int):
        if niceness:
            try:
                os.nice(niceness)
            except OSError:  # not allowed here: keep the default priority
                pass
        self.job = job
        self.worker: ActorWorker | None = None
        self.incarnation = uuid.uuid4().hex  # a restart runs __init__ again: tells restarts apart

    def where(self) -> dict[str, Any]:
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "incarnation": self.incarnation}

    def start(self, seed: int, weights: Any) -> str:
        if self.worker is not None:
            self.worker.close()
        self.worker = ActorWorker(self.job, seed)
        self.worker.load(_owned(weights))
        return self.incarnation

    def chunk(self, weights: Any, incarnation: str) -> dict[str, Any] | None:
        # A call sent to an earlier incarnation reaches an actor that was not started: None says so.
        if incarnation != self.incarnation or self.worker is None:
            return None
        if weights is not None:
            self.worker.load(_owned(weights))
        return self.worker.chunk()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


@dataclass
class _Actor:
    index: int
    seed: int
    handle: Any
    restarts: int = 0
    version: int = -1
    """The weights version its latest call carried."""
    pending: collections.deque = field(default_factory=collections.deque)
    where: dict[str, Any] = field(default_factory=dict)


class RayActorPool:
    """``job.count`` off-policy actors on Ray (an ``rlf.training.actors.ActorPool``)."""

    def __init__(self, job: ActorJob, config: RayCollectorConfig):
        self.config = config
        self.lockstep = job.lockstep
        self.restarts = 0
        self._closed = False
        self._owns_ray = connect(config, config.actor_cpus * job.count)
        self._address = resolve_address(config)
        self._weights = ray.put(job.weights)
        self._version = 0
        self._turn, self._taken, self._rotation = 0, None, 0
        remote = ray.remote(ActorHost).options(**actor_options(config))
        bare = dataclasses.replace(job, weights=None)  # weights go through the object store, once
        self.actors = [_Actor(i, seed, remote.remote(bare, config.niceness)) for i, seed in enumerate(job.seeds)]
        try:
            self._start_all()
        except BaseException:
            self.close()
            raise

    def _start_all(self) -> None:
        timeout = self.config.restart_timeout_s
        try:
            places = ray.get([actor.handle.where.remote() for actor in self.actors], timeout=timeout)
            started = [actor.handle.start.remote(actor.seed, self._weights) for actor in self.actors]
            ray.get(started, timeout=timeout)
        except GetTimeoutError:
            raise EnvWorkerError(
                f"the Ray cluster ({self._address}) did not start {len(self.actors)} off-policy actors of "
                f"{self.config.actor_cpus:g} CPU{_resources_text(self.config)} within {timeout:g} s (free now: "
                f"{_free_resources()}); lower collector.actor_cpus or algo.actors, or add nodes") from None
        except RayTaskError as exc:
            raise RuntimeError(f"off-policy actor failed to start: {_cause(exc)}") from None
        except RayActorError as exc:
            raise EnvWorkerError(f"an off-policy actor failed to start: {_first_line(exc)}") from exc
        for actor, place in zip(self.actors, places, strict=True):
            actor.where = place
            actor.version = self._version
        for actor in self.actors:
            self._fill(actor)

    @property
    def placement(self) -> list[str]:
        """The Ray node id each actor runs on, in actor order (as of its latest start)."""
        return [actor.where.get("node_id", "") for actor in self.actors]

    # -- ActorPool -------------------------------------------------------------------------------
    def push(self, weights: Any) -> None:
        self._weights = ray.put(weights)
        self._version += 1

    def collect(self) -> tuple[int, dict[str, Any]]:
        if self.lockstep:
            return self._collect_in_turn()
        while True:
            # rotate who is looked at first, so an actor that is always ready cannot starve the others
            order = self.actors[self._rotation:] + self.actors[:self._rotation]
            self._rotation = (self._rotation + 1) % len(self.actors)
            waiting = {actor.pending[0]: actor for actor in order if actor.pending}
            ready, _ = ray.wait(list(waiting), num_returns=1)
            actor = waiting[ready[0]]
            chunk = self._receive(actor)
            self._fill(actor)
            if chunk is not None:
                return actor.index, chunk

    def _collect_in_turn(self) -> tuple[int, dict[str, Any]]:
        if self._taken is not None:  # its next chunk starts now, with the weights pushed since
            self._fill(self.actors[self._taken])
        actor = self.actors[self._turn]
        self._turn = (self._turn + 1) % len(self.actors)
        while True:
            chunk = self._receive(actor)
            if chunk is not None:
                self._taken = actor.index
                return actor.index, chunk
            self._fill(actor)  # restarted: its next chunk comes from the fresh episodes

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close_actors([actor.handle for actor in getattr(self, "actors", [])], self._owns_ray)

    # -- calls -----------------------------------------------------------------------------------
    def _fill(self, actor: _Actor) -> None:
        """Queues chunk calls up to the depth (1 in lockstep); the first carries new weights, if any."""
        depth = 1 if self.lockstep else IN_FLIGHT
        while len(actor.pending) < depth:
            weights = self._weights if actor.version < self._version else None
            actor.version = self._version
            actor.pending.append(actor.handle.chunk.remote(weights, actor.where["incarnation"]))

    def _receive(self, actor: _Actor) -> dict[str, Any] | None:
        """The actor's oldest chunk; None when it was lost to a restart (the actor is started again)."""
        ref = actor.pending.popleft()
        try:
            chunk = ray.get(ref)
        except RayTaskError as exc:  # the actor's own code raised: as the local actors report it
            raise RuntimeError(f"off-policy actor failed: actor {actor.index}: {_cause(exc)}") from None
        except RayActorError as exc:
            self._restart(actor, exc)
            return None
        if chunk is None:  # Ray had restarted it before this call arrived
            self._restart(actor, None)
            return None
        return _owned(chunk)

    def _restart(self, actor: _Actor, error: BaseException | None) -> None:
        """Waits for Ray to bring ``actor`` back and starts it on fresh episodes and the latest weights
        (see ``revive``)."""
        actor.pending.clear()  # calls sent to the dead incarnation: lost, or answered with None

        def start(timeout: float) -> None:
            seed = actor.seed + RESTART_SEED_STRIDE * actor.restarts
            try:
                ray.get(actor.handle.start.remote(seed, self._weights), timeout=timeout)
            except RayTaskError as exc:
                raise RuntimeError(f"off-policy actor failed: actor {actor.index}: {_cause(exc)}") from None
            actor.version = self._version

        _, reborn = revive(actor, error, self.config, f"off-policy actor {actor.index}", start)
        self.restarts += reborn


def _cause(error: RayTaskError) -> str:
    """What the actor's code raised, as the local actors report it: ``Type: first line``."""
    cause = getattr(error, "cause", None) or error
    return f"{type(cause).__name__}: {_first_line(cause)}"


def _resources_text(config: RayCollectorConfig) -> str:
    return "".join(f" + {value:g} {key}" for key, value in config.resources.items())


def build_actor_pool(job: ActorJob, config: RayCollectorConfig) -> RayActorPool:
    """The ``ray`` collector's actor pool (registered by rlf_plugin_ray.plugin)."""
    return RayActorPool(job, config)

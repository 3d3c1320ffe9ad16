"""Off-policy actors: processes that step their own envs with the learner's latest weights and send
chunks of transitions back, the ``ActorPool`` contract a collector plugin (Ray) implements, and the
wire format of one actor's job.
"""

from __future__ import annotations

import os
import queue
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from rlf import observations
from rlf.envs.collectors import make_vector_env
from rlf.interfaces import BuildContext, StateTree
from rlf.training.episodes import EpisodeTracker

CHUNK_ENV_STEPS = 64
"""Env steps per ``step()`` call (and per actor message), so per-call costs are paid once per chunk."""

ACTOR_SEED_STRIDE = 104_729
"""Seed distance between actors: more than any vector of envs (seeds seed..seed+num_envs-1) spans."""

QUEUE_POLL_S = 1.0


class StopFlag:
    """A stop request from a parent to the processes it forked, read and written without a lock.

    ``multiprocessing.Event`` takes a lock shared with every child on each ``is_set()``: a child killed
    (SIGKILL, the out-of-memory killer) inside that call holds it for good, and the parent's ``set()``
    then blocks forever (an APPO run hung in its pool's close() that way after its actor-kill test). One
    byte of shared memory is written and read whole, so nothing a child dies holding can stop the parent.
    """

    def __init__(self, ctx) -> None:
        self._value = ctx.RawValue("b", 0)

    def set(self) -> None:
        self._value.value = 1

    def is_set(self) -> bool:
        return bool(self._value.value)


@dataclass
class ActorJob:
    """What an actor pool needs to start a run's actors; picklable, to ship to other machines."""

    algorithm: Any
    """The registered algorithm: ``algorithm.build_agent(context)`` builds each actor's agent copy."""
    env_name: str
    env_factory: Any
    context: BuildContext
    """The learner's; each actor builds with its own seed and env spec (``context.run.num_envs`` envs)."""
    seeds: list[int]
    """Actor ``i`` seeds its agent with ``seeds[i]`` and resets its envs from it."""
    weights: StateTree
    """The learner's weights at the start: every actor loads them before its first chunk."""
    lockstep: bool = False
    """``collect`` takes actors in turn and an actor starts a chunk only when the previous was taken."""
    chunk_steps: int | None = None
    """Vector steps per chunk; None: enough for ``CHUNK_ENV_STEPS`` env steps. A strategy that learns
    from whole trajectories of a fixed length (V-trace) sets its own."""

    @property
    def count(self) -> int:
        return len(self.seeds)


class ActorPool(Protocol):
    """The off-policy strategy's only view of actors hosted elsewhere (the seam a collector's
    ``build_actor_pool(job, config)`` fills; every actor is an ``ActorWorker``, started on ``job.weights``)."""

    restarts: int
    """Actors restarted so far (logged as ``actor_restarts``)."""

    def collect(self) -> tuple[int, dict[str, Any]]:
        """The next chunk as ``(actor index, ActorWorker.chunk())``, arrays owned by this process.

        Lockstep: actor 0's, 1's, ... in turn; an actor's next chunk starts at the first ``collect``
        after its previous one was returned, with the weights pushed by then. Otherwise: whichever
        is ready. Raises an ``rlf.errors.RlfError`` (one line) when actors are lost for good."""

    def push(self, weights: StateTree) -> None:
        """The learner's new weights, for every actor's next chunk."""

    def close(self) -> None: ...


class ActorWorker:
    """One actor: own envs (in this process) and own agent copy; each ``chunk()`` steps them
    ``chunk_steps`` times. Local processes and every actor pool run this same code, so the same
    seed and weights give the same transitions wherever an actor runs."""

    def __init__(self, job: ActorJob, seed: int):
        run = job.context.run
        self.envs = make_vector_env(job.env_name, job.env_factory, run.num_envs, subprocess=False)
        try:
            context = replace(job.context, env_spec=self.envs.spec, seed=seed, device="cpu")
            self.agent = job.algorithm.build_agent(context)
            spec = self.envs.spec
            self.tracker = EpisodeTracker(spec.agent_ids, self.envs.num_envs, spec.multi_agent)
            self.chunk_steps = job.chunk_steps or max(1, -(-CHUNK_ENV_STEPS // self.envs.num_envs))
            self.obs = self.envs.reset(seed=seed)
        except BaseException:
            self.envs.close()
            raise

    def load(self, weights: StateTree) -> None:
        self.agent.load_state_dict(weights)

    def chunk(self) -> dict[str, Any]:
        """``chunk_steps`` steps of every env: per-step arrays stacked (steps, n, ...) per field and
        agent, what ``act`` returned in ``Acting.extras`` stacked the same way (``extras[agent][key]``:
        an off-policy correction needs the behaviour policy's log-probabilities), episode ends, and
        the episodes that ended as ``(step, row)``."""
        envs, agent, tracker = self.envs, self.agent, self.tracker
        agent_ids, n = envs.spec.agent_ids, envs.num_envs
        columns: dict[str, dict[str, list[np.ndarray]]] = {
            name: {a: [] for a in agent_ids}
            for name in ("obs", "actions", "rewards", "next_obs", "terminated", "truncated", "alive")}
        extras: dict[str, dict[str, list[np.ndarray]]] = {a: {} for a in agent_ids}
        ended_steps: list[np.ndarray] = []
        episodes: list[tuple[int, dict[str, float]]] = []
        obs = self.obs
        for t in range(self.chunk_steps):
            acting = agent.act(obs, explore=True)
            batch = envs.step(acting.actions)
            for a, values in acting.extras.items():
                if a in extras:
                    for key, value in values.items():
                        extras[a].setdefault(key, []).append(np.asarray(value))
            for name, source in (("obs", obs), ("actions", acting.actions), ("rewards", batch.rewards),
                                 ("next_obs", batch.next_obs), ("terminated", batch.terminated),
                                 ("truncated", batch.truncated), ("alive", batch.alive)):
                for a in agent_ids:
                    value = source[a]
                    columns[name][a].append(value if isinstance(value, dict | tuple) else np.asarray(value))
            ended = batch.episode_ended
            ended_steps.append(ended.copy())
            if batch.ended_envs:
                episodes.extend((t, row) for row in tracker.update(batch, agent.metrics()))
                agent.reset_state(ended)
            else:
                tracker.update(batch)
            agent.on_progress(n, len(batch.ended_envs))
            obs = batch.obs
        self.obs = obs
        return {"steps": self.chunk_steps, "episode_ended": np.stack(ended_steps), "episodes": episodes,
                "arrays": {name: {a: observations.stack(values) for a, values in per_agent.items()}
                           for name, per_agent in columns.items()},
                "extras": {a: {key: np.stack(values) for key, values in per_agent.items()}
                           for a, per_agent in extras.items()}}

    def close(self) -> None:
        self.envs.close()


def drain(reports) -> None:
    """Empty the actors' report queue (at shutdown: a queue with items left keeps its feeder thread alive)."""
    try:
        while True:
            reports.get_nowait()
    except (queue.Empty, OSError, ValueError):
        pass


def _latest(inbox) -> Any:
    latest = None
    try:
        while True:
            latest = inbox.get_nowait()
    except queue.Empty:
        pass
    return latest


@dataclass
class ActorHost:
    """What a forked actor process (``run_actor``) shares with the process that started it; handed over
    by fork, never pickled, so the queues and shared arrays are the host's own."""

    job: ActorJob
    worker_init: Callable[[], None]
    """The learner's ``worker_init``, called first in the actor process."""
    reports: Any
    """A multiprocessing queue the actor puts ``("chunk", (index, chunk))`` and ``("error", line)`` on."""
    stop: StopFlag
    heartbeats: Any
    """A shared array of doubles, one per actor: the actor's last ``time.monotonic()`` of progress."""


def run_actor(host: ActorHost, index: int, seed: int, inbox) -> None:
    """An actor process: an ``ActorWorker`` sending chunks and loading pushed weights (from ``inbox``;
    in lockstep (``host.job.lockstep``) a chunk starts only when the host sends weights or None)."""
    reports, stop, heartbeats = host.reports, host.stop, host.heartbeats
    # Ctrl-C reaches the whole process group: the main process checkpoints and stops the actors
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    lockstep = host.job.lockstep

    def running() -> bool:
        return not stop.is_set() and os.getppid() == parent

    try:
        host.worker_init()
        # in-process envs: a daemonic actor may not start env subprocesses of its own
        worker = ActorWorker(host.job, seed)
        worker.load(inbox.get())
        first = True
        while running():
            heartbeats[index] = time.monotonic()
            if lockstep and not first:  # wait for the learner to take the last chunk: None keeps the weights
                weights = _await(inbox, running, lambda: heartbeats.__setitem__(index, time.monotonic()))
                if weights is _STOPPED:
                    break
            else:
                weights = None if lockstep else _latest(inbox)
            first = False
            if weights is not None:
                worker.load(weights)
            chunk = worker.chunk()
            while running():
                heartbeats[index] = time.monotonic()  # waiting on the learner is no hang
                try:
                    reports.put(("chunk", (index, chunk)), timeout=QUEUE_POLL_S)
                    break
                except queue.Full:
                    continue
        worker.close()
    except Exception as exc:  # noqa: BLE001 - reported to the main process, which raises it
        reports.put(("error", f"actor {index}: {type(exc).__name__}: {exc}"))


_STOPPED = object()


def _await(inbox, running, alive) -> Any:
    """The next message, or ``_STOPPED`` once the run stops; ``alive()`` each poll (waiting on the
    learner is no hang)."""
    while running():
        alive()
        try:
            return inbox.get(timeout=QUEUE_POLL_S)
        except queue.Empty:
            continue
    return _STOPPED

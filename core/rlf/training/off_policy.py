"""Off-policy: act, hand every step's transitions to the learner (which keeps the replay and learns
from samples), advance exploration per step and per finished episode.

With ``actors > 0`` acting overlaps learning. Each actor process steps its own ``num_envs`` envs
(built from the picklable env factory, seeded apart) with its own copy of the agent, and sends chunks
of steps to this process. Here every step is handed to ``learner.learn`` as before, the agent's
exploration advances by the actors' steps, and ``learner.weights()`` is pushed to every actor each
``actor_sync_interval`` env steps. The learner sees one vector of ``actors * num_envs`` envs (that is
the ``num_envs`` of the env spec it is built with): actor ``i`` owns rows ``i*num_envs`` to
``(i+1)*num_envs - 1``, and in each ``Transitions`` only the rows of the actor that sent it are
alive. Actors step their envs in-process; the run's collector (``run.vector``) is what
``actors = 0`` steps, and, if it offers an actor pool (``build_actor_pool``, e.g. ``vector = "ray"``),
where the actors run; otherwise they are forked local processes.

Actor mode takes chunks as they come and actors load pushed weights whenever they arrive, so it is
not reproducible step for step; ``actors = 0`` is, and so is ``actor_lockstep = true``: the learner
takes one chunk from each actor in turn, and an actor starts its next chunk only when its previous
one was taken, with the weights pushed by then. Every pool runs the same ``ActorWorker``, so in
lockstep local and Ray actors hand the learner the same transitions.

Actors are supervised: one that dies, or makes no progress (a chunk, or a try to hand one over) for
``run.env_timeout`` seconds, stops the run with an ``EnvWorkerError`` naming it (see ``_check_actors``).

Weights pushed to actors are loaded with ``agent.load_state_dict``; an agent whose state carries an
action RNG should leave it out of ``learner.weights()`` so each actor keeps its own stream.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from ..envs import describe_env, exit_description, make_vector_env
from ..errors import EnvWorkerError
from ..interfaces import BuildContext, StateTree, Transitions
from ..plugins import StrategyFamily
from .strategy import (
    BaseStrategy,
    EpisodeTracker,
    StepResult,
    average_metrics,
    plugin_call,
    say_fresh_episodes,
)

CHUNK_ENV_STEPS = 64
"""Env steps per ``step()`` call (and per actor message), so per-call costs are paid once per chunk."""

ACTOR_SEED_STRIDE = 104_729
"""Seed distance between actors: more than any vector of envs (seeds seed..seed+num_envs-1) spans."""

QUEUE_POLL_S = 1.0


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
            self.chunk_steps = max(1, -(-CHUNK_ENV_STEPS // self.envs.num_envs))
            self.obs = self.envs.reset(seed=seed)
        except BaseException:
            self.envs.close()
            raise

    def load(self, weights: StateTree) -> None:
        self.agent.load_state_dict(weights)

    def chunk(self) -> dict[str, Any]:
        """``chunk_steps`` steps of every env: per-step arrays stacked (steps, n, ...) per field and
        agent, episode ends, and the episodes that ended as ``(step, row)``."""
        envs, agent, tracker = self.envs, self.agent, self.tracker
        agent_ids, n = envs.spec.agent_ids, envs.num_envs
        columns: dict[str, dict[str, list[np.ndarray]]] = {
            name: {a: [] for a in agent_ids}
            for name in ("obs", "actions", "rewards", "next_obs", "terminated", "truncated", "alive")}
        ended_steps: list[np.ndarray] = []
        episodes: list[tuple[int, dict[str, float]]] = []
        obs = self.obs
        for t in range(self.chunk_steps):
            acting = agent.act(obs, explore=True)
            batch = envs.step(acting.actions)
            for name, source in (("obs", obs), ("actions", acting.actions), ("rewards", batch.rewards),
                                 ("next_obs", batch.next_obs), ("terminated", batch.terminated),
                                 ("truncated", batch.truncated), ("alive", batch.alive)):
                for a in agent_ids:
                    columns[name][a].append(np.asarray(source[a]))
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
                "arrays": {name: {a: np.stack(values) for a, values in per_agent.items()}
                           for name, per_agent in columns.items()}}

    def close(self) -> None:
        self.envs.close()


class OffPolicyStrategy(BaseStrategy):
    family = StrategyFamily.OFF_POLICY

    def setup(self) -> None:
        self.actors: list[Any] = []
        self.pool: ActorPool | None = None
        count = getattr(self.context.config, "actors", 0)
        if count:
            self._setup_actors(count)
        else:
            super().setup()

    actor_restarts_used = 0
    """Actor restarts before a resume (the Trainer sets it from the checkpoint's counters, as it does
    ``restarts_used``), so ``actor_restarts`` counts the whole run."""

    @property
    def actor_restarts(self) -> int:
        """Actors a pool restarted in this run so far, resumes included (logged once there is one)."""
        pool = getattr(self, "pool", None)
        return self.actor_restarts_used + (pool.restarts if pool is not None else 0)

    def step(self, limit: int) -> StepResult:
        if self.actors or self.pool is not None:  # set by setup()
            return self._step_actors(limit)
        envs, agent, learner, tracker = self.envs, self.agent, self.learner, self.tracker
        n = envs.num_envs
        iterations = max(1, min(-(-CHUNK_ENV_STEPS // n), -(-limit // n)))
        learned: list[dict[str, float]] = []
        episodes: list[dict[str, float]] = []
        obs = self.obs
        for _ in range(iterations):
            acting = agent.act(obs, explore=True)
            batch = envs.step(acting.actions)
            metrics = plugin_call(self.algorithm, "learn()", learner.learn,
                                  Transitions(obs, acting.actions, batch.rewards, batch.next_obs, batch.terminated,
                                              batch.truncated, batch.alive, batch.episode_ended))
            if metrics:
                learned.append(metrics)
            if batch.ended_envs:
                episodes.extend(tracker.update(batch, agent.metrics()))
                agent.reset_state(batch.episode_ended)
                agent.on_progress(n, len(batch.ended_envs))
            else:
                tracker.update(batch)
                agent.on_progress(n, 0)
            obs = batch.obs
        self.obs = obs
        metrics = average_metrics(learned)
        metrics.update(agent.metrics())
        return StepResult(iterations * n, metrics, episodes)

    # -- overlapped actors -------------------------------------------------------------------------
    def _setup_actors(self, count: int) -> None:
        run = self.context.run
        probe = self.env_factory()
        try:
            spec = describe_env(self.env_name, probe, run.num_envs * count)
        finally:
            probe.close()
        self.context.env_spec = spec
        self.agent = plugin_call(self.algorithm, "build_agent", self.algorithm.build_agent, self.context)
        self.learner = plugin_call(self.algorithm, "build_learner", self.algorithm.build_learner, self.context,
                                   self.agent)
        self.tracker = EpisodeTracker(spec.agent_ids, spec.num_envs, spec.multi_agent)
        if self._pending_state is not None:
            self._restore(self._pending_state)
            self._pending_state = None
            say_fresh_episodes("off-policy actor processes step their own envs")
        self._steps_since_sync = 0
        weights = self.learner.weights()
        base_seed = run.seed + 7919 * self._reset_count
        seeds = [base_seed + ACTOR_SEED_STRIDE * (index + 1) for index in range(count)]
        self._lockstep = bool(getattr(self.context.config, "actor_lockstep", False))
        self._job = ActorJob(self.algorithm, self.env_name, self.env_factory, self.context, seeds, weights,
                             self._lockstep)
        build_pool = getattr(self.collector, "build_actor_pool", None)
        if build_pool is not None:
            self.pool = build_pool(self._job, self.collector.config)
            return
        # lockstep bookkeeping: whose chunk is next, chunks that came early, weights not yet sent
        self._turn, self._taken, self._early = 0, None, {}
        self._unsent: list[Any] = [None] * count
        # fork, as the async on-policy workers do: actors get the builders without pickling them
        ctx = mp.get_context("fork")
        self._reports = ctx.Queue(maxsize=2 * count)
        self._stop = ctx.Event()
        self._weight_queues = []
        # each actor stamps time.monotonic() (one clock for all processes) here as it makes progress
        self._heartbeats = ctx.Array("d", [time.monotonic()] * count, lock=False)
        self._next_health_check = 0.0
        for index in range(count):
            inbox = ctx.Queue()
            inbox.put(weights)
            process = ctx.Process(target=_run_actor, name=f"rlf-actor-{index}", daemon=True,
                                  args=(self, index, seeds[index], inbox))
            process.start()
            self._weight_queues.append(inbox)
            self.actors.append(process)

    def _next_chunk(self) -> tuple[int, dict[str, Any]]:
        """The local actors' next chunk; in lockstep, the next actor's in turn (see the module doc)."""
        if not self._lockstep:
            return self._next_report()
        if self._taken is not None:  # its next chunk starts now, with the weights pushed since
            self._weight_queues[self._taken].put(self._unsent[self._taken])
            self._unsent[self._taken] = None
        index = self._turn
        self._turn = (index + 1) % len(self.actors)
        while index not in self._early:
            sender, chunk = self._next_report()
            self._early[sender] = chunk
        self._taken = index
        return index, self._early.pop(index)

    def _push(self, weights: StateTree) -> None:
        if self.pool is not None:
            self.pool.push(weights)
        elif self._lockstep:
            self._unsent = [weights] * len(self.actors)
        else:
            for inbox in self._weight_queues:
                inbox.put(weights)

    def _next_report(self) -> tuple[int, dict[str, Any]]:
        while True:
            if time.monotonic() >= self._next_health_check:
                # also while chunks flow: the other actors go on reporting after one is lost
                self._check_actors()
                self._next_health_check = time.monotonic() + QUEUE_POLL_S
            try:
                kind, payload = self._reports.get(timeout=QUEUE_POLL_S)
            except queue.Empty:
                continue
            if kind == "error":
                raise RuntimeError(f"off-policy actor failed: {payload}")
            return payload

    def _check_actors(self) -> None:
        """A lost or hung actor stops the run with one line (``EnvWorkerError``).

        Lost actors are not replaced: they share one report queue, and a process killed while
        writing to it can leave it unusable for the others; the last checkpoint resumes the run."""
        timeout = self.context.run.env_timeout
        now = time.monotonic()
        for index, process in enumerate(self.actors):
            if process.exitcode is not None:
                problem = exit_description(process.exitcode)
            elif now - self._heartbeats[index] > timeout:
                process.kill()  # stopped or stuck: it would never answer the stop request
                problem = f"made no progress for {timeout:g} s (run.env_timeout)"
            else:
                continue
            raise EnvWorkerError(f"off-policy actor {index} of {self.context.run.algorithm} on {self.env_name} "
                                 f"(pid {process.pid}) {problem}; lost actors are not replaced")

    def _step_actors(self, limit: int) -> StepResult:
        index, chunk = self.pool.collect() if self.pool is not None else self._next_chunk()
        agent, learner = self.agent, self.learner
        n = self.context.run.num_envs
        total = self.context.env_spec.num_envs
        rows = slice(index * n, (index + 1) * n)
        # the budget is exact: steps past it are dropped, not learned from
        used = min(chunk["steps"], -(-limit // n))
        learned: list[dict[str, float]] = []
        for t in range(used):
            step = {name: {a: values[t] for a, values in per_agent.items()}
                    for name, per_agent in chunk["arrays"].items()}
            ended = chunk["episode_ended"][t]
            wide = {name: {a: _widen(array, rows, total) for a, array in per_agent.items()}
                    for name, per_agent in step.items()}
            metrics = plugin_call(self.algorithm, "learn()", learner.learn, Transitions(
                wide["obs"], wide["actions"], wide["rewards"], wide["next_obs"], wide["terminated"],
                wide["truncated"], wide["alive"], _widen(ended, rows, total)))
            if metrics:
                learned.append(metrics)
            agent.on_progress(n, int(ended.sum()))
        episodes = []
        for t, row in chunk["episodes"]:
            if t < used:  # every actor counts its own episodes: number them here
                self.tracker.episodes += 1
                episodes.append({**row, "episode": float(self.tracker.episodes)})
        self._steps_since_sync += used * n
        if self._steps_since_sync >= self.context.config.actor_sync_interval:
            self._steps_since_sync = 0
            self._push(self.learner.weights())
        metrics = average_metrics(learned)
        metrics.update(agent.metrics())
        return StepResult(used * n, metrics, episodes)

    def teardown(self) -> None:
        if getattr(self, "pool", None) is not None:
            pool, self.pool = self.pool, None
            pool.close()
        if getattr(self, "actors", None):
            self._stop.set()
            # one deadline for all: an actor killed while writing to the report queue can leave
            # the others unable to flush it, and they must not be waited on one after another
            deadline = time.monotonic() + 10.0
            for process in self.actors:
                # keep draining: an actor blocked on a full queue, or flushing one, cannot exit
                while process.is_alive() and time.monotonic() < deadline:
                    _drain(self._reports)
                    process.join(timeout=0.1)
                if process.is_alive():
                    process.terminate()
                    process.join(timeout=5)
            for inbox in self._weight_queues:
                inbox.cancel_join_thread()  # unread weights must not hold this process at exit
                inbox.close()
            self._reports.close()
            self.actors = []
        super().teardown()


def _widen(array: np.ndarray, rows: slice, total: int) -> np.ndarray:
    """One actor's (n, ...) array placed at ``rows`` of a (total, ...) zero array (not alive there)."""
    if rows.stop - rows.start == total:
        return array
    full = np.zeros((total, *array.shape[1:]), dtype=array.dtype)
    full[rows] = array
    return full


def _drain(reports) -> None:
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


def _run_actor(strategy: OffPolicyStrategy, index: int, seed: int, inbox) -> None:
    """An actor process: an ``ActorWorker`` sending chunks and loading pushed weights."""
    reports, stop, heartbeats = strategy._reports, strategy._stop, strategy._heartbeats
    # Ctrl-C reaches the whole process group: the main process checkpoints and stops the actors
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    lockstep = strategy._lockstep

    def running() -> bool:
        return not stop.is_set() and os.getppid() == parent

    try:
        strategy.learner.worker_init()
        # in-process envs: a daemonic actor may not start env subprocesses of its own
        worker = ActorWorker(strategy._job, seed)
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

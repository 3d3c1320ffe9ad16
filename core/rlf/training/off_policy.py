"""The off-policy strategy family: every step's transitions go to the learner (its replay buffer),
exploration follows the algorithm's epsilon schedule, and with ``algo.actors > 0`` experience comes
from actor processes (``actors.py``) or an actor pool a collector plugin provides.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from typing import Any

import numpy as np

from rlf import observations
from rlf.envs.workers import exit_description
from rlf.errors import EnvWorkerError
from rlf.finite import act_on
from rlf.interfaces import StateTree, Transitions
from rlf.logging.means import average_metrics
from rlf.plugins.specs import StrategyFamily
from rlf.training.actors import (
    ACTOR_SEED_STRIDE,
    CHUNK_ENV_STEPS,
    QUEUE_POLL_S,
    ActorHost,
    ActorJob,
    ActorPool,
    StopFlag,
    drain,
    run_actor,
)
from rlf.training.startup import learn_call
from rlf.training.strategy import BaseStrategy, StepResult


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
    """Actor restarts before a resume (``resume_supervision``, from the checkpoint's counters), so
    ``actor_restarts`` counts the whole run."""

    @property
    def actor_restarts(self) -> int:
        """Actors a pool restarted in this run so far, resumes included (logged once there is one)."""
        pool = getattr(self, "pool", None)
        return self.actor_restarts_used + (pool.restarts if pool is not None else 0)

    def resume_supervision(self, counters: dict[str, int]) -> None:
        super().resume_supervision(counters)
        self.actor_restarts_used = int(counters.get("actor_restarts", 0))

    def supervision_counters(self) -> dict[str, int]:
        counters = super().supervision_counters()
        if self.actor_restarts:
            counters["actor_restarts"] = self.actor_restarts
        return counters

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
            acting = act_on(agent, obs, explore=True)
            batch = envs.step(acting.actions)
            metrics = learn_call(self.algorithm, learner.learn,
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
        self.build_on_probe(run.num_envs * count)
        if self._pending_state is not None:
            self._pending_state = None
            self.start_fresh_episodes("off-policy actor processes step their own envs")
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
        self._stop = StopFlag(ctx)
        self._weight_queues = []
        # each actor stamps time.monotonic() (one clock for all processes) here as it makes progress
        self._heartbeats = ctx.Array("d", [time.monotonic()] * count, lock=False)
        self._next_health_check = 0.0
        host = ActorHost(self._job, self.learner.worker_init, self._reports, self._stop, self._heartbeats)
        for index in range(count):
            inbox = ctx.Queue()
            inbox.put(weights)
            process = ctx.Process(target=run_actor, name=f"rlf-actor-{index}", daemon=True,
                                  args=(host, index, seeds[index], inbox))
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
            self._raise_reported_error()
            raise EnvWorkerError(f"off-policy actor {index} of {self.context.run.algorithm} on {self.env_name} "
                                 f"(pid {process.pid}) {problem}; lost actors are not replaced")

    def _raise_reported_error(self) -> None:
        """An actor that fails reports why and then exits: its report may still be in the queue when
        the health check sees the exit, and the report is the better line. The run stops either way,
        so chunks read past here are dropped."""
        deadline = time.monotonic() + QUEUE_POLL_S
        while time.monotonic() < deadline:
            try:
                kind, payload = self._reports.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                return
            if kind == "error":
                raise RuntimeError(f"off-policy actor failed: {payload}")

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
            step = {name: {a: observations.index(values, t) for a, values in per_agent.items()}
                    for name, per_agent in chunk["arrays"].items()}
            ended = chunk["episode_ended"][t]
            wide = {name: {a: _widen(array, rows, total) for a, array in per_agent.items()}
                    for name, per_agent in step.items()}
            metrics = learn_call(self.algorithm, learner.learn, Transitions(
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
                    drain(self._reports)
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


def _widen(array: Any, rows: slice, total: int) -> Any:
    """One actor's (n, ...) array placed at ``rows`` of a (total, ...) zero array (not alive there)."""
    if rows.stop - rows.start == total:
        return array
    if isinstance(array, dict | tuple):  # Dict/Tuple observations: each part widened
        return observations.tree_map(lambda part: _widen(part, rows, total), array)
    full = np.zeros((total, *array.shape[1:]), dtype=array.dtype)
    full[rows] = array
    return full

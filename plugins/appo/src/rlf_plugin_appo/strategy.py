"""The ``actor-learner`` strategy family: actors step their own envs with the learner's latest weights
and send fixed-length chunks (``rollout_steps`` x their envs, with ``Acting.extras``: the behaviour
policy's log-probabilities); the learner learns from each chunk as it arrives, never waiting for the
other actors, and pushes its new weights. Actors keep collecting meanwhile, with weights a few updates
old: the learner (APPO's V-trace) corrects for that.

Actors are local forked processes (``actors.py``), or, where the run's collector registers
``build_actor_pool`` (``vector = "ray"``), that collector's actors: both run the core's ``ActorWorker``.

An algorithm on this family: ``family="actor-learner"``, a config that subclasses
``ActorLearnerConfig``, an agent whose ``act`` returns ``extras[agent]["log_prob"]`` and
``extras[agent]["policy_version"]`` and whose ``load_state_dict`` takes what ``learner.push_state()``
returns, and a learner with ``learn(Trajectory)`` (``rlf_plugin_appo.learner``).
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

import rlf
from rlf import plugin_call
from rlf.errors import ConfigError, EnvWorkerError, PluginRunError
from rlf.interfaces import StateTree
from rlf.training.actors import ACTOR_SEED_STRIDE, ActorJob

from .actors import ActorsLost, LocalActorPool
from .agent import VERSION_KEY
from .config import ActorLearnerConfig
from .learner import Trajectory

__all__ = ["ActorLearnerConfig", "ActorLearnerStrategy", "ActorsLostError"]


class ActorsLostError(PluginRunError):
    """Every actor was lost and the restart budget is spent. One line; the run's state is whole (the
    learner only ever learns from complete chunks), so the Trainer saves it first and
    ``rlf train --resume`` continues with fresh actors."""

    hook_only = True  # the Trainer's signal that the training state is whole: checkpoint, then stop


class ActorLearnerStrategy(rlf.BaseStrategy):
    family = "actor-learner"

    lost_before = 0
    joined_before = 0
    dropped = 0

    def resume_supervision(self, counters: dict[str, int]) -> None:
        super().resume_supervision(counters)
        self.lost_before = int(counters.get("actors_lost", 0))
        self.joined_before = int(counters.get("actors_joined", 0))

    def supervision_counters(self) -> dict[str, int]:
        counters = super().supervision_counters()
        lost, joined = self._faults()
        if lost or joined:
            counters.update(actors_lost=lost, actors_joined=joined)
        return counters

    def _faults(self) -> tuple[int, int]:
        pool = getattr(self, "pool", None)
        lost = getattr(pool, "lost", None)
        restarts = getattr(pool, "restarts", 0) if pool is not None else 0
        # a pool that restarts actors itself (Ray) only counts restarts: each was a loss first
        return (self.lost_before + (restarts if lost is None else lost), self.joined_before + restarts)

    def setup(self) -> None:
        config, run = self.context.config, self.context.run
        self.pool = None
        count = config.actors
        if run.num_envs % count:
            raise ConfigError(f"run.num_envs={run.num_envs} does not split evenly among algo.actors={count}; "
                              f"use a multiple of {count} envs or another actor count")
        per_actor = run.num_envs // count
        self.build_on_probe(run.num_envs)
        if self._pending_state is not None:
            self.dropped = int(self._pending_state.get("chunks_dropped", 0))
            self._pending_state = None
            self.start_fresh_episodes("actor-learner actors step their own envs")
        base_seed = run.seed + 7919 * self._reset_count
        seeds = [base_seed + ACTOR_SEED_STRIDE * (index + 1) for index in range(count)]
        actor_run = run.model_copy(update={"num_envs": per_actor})
        self._job = ActorJob(self.algorithm, self.env_name, self.env_factory, replace(self.context, run=actor_run),
                             seeds, self.learner.push_state(), chunk_steps=config.rollout_steps)
        self.per_actor = per_actor
        build_pool = getattr(self.collector, "build_actor_pool", None)
        if build_pool is not None:
            self.pool = build_pool(self._job, self.collector.config)
        else:
            self.pool = LocalActorPool(self._job, self.learner.worker_init,
                                       restart_budget=max(0, config.actor_restarts - self.joined_before),
                                       timeout=run.env_timeout, label=f"{run.algorithm} on {self.env_name}")

    def step(self, limit: int) -> rlf.StepResult:
        try:
            index, chunk = self.pool.collect()
        except ActorsLost as exc:
            raise ActorsLostError(f"{self.context.run.algorithm} stopped: {exc}; the run's state at this point "
                                  f"is saved, continue with: rlf train --resume {self.context.run.run_dir or '<run dir>'}") from None
        except EnvWorkerError as exc:  # a pool that restarts actors itself ran out of restarts
            raise ActorsLostError(f"{self.context.run.algorithm} stopped: {exc}; the run's state at this point "
                                  "is saved, continue with rlf train --resume") from None
        n = self.per_actor
        used = max(1, min(chunk["steps"], -(-limit // n)))  # the budget is exact: steps past it are dropped
        agent_id = self.context.env_spec.agent_ids[0]
        arrays, extras = chunk["arrays"], chunk["extras"][agent_id]
        versions = np.asarray(extras[VERSION_KEY][:used])
        staleness = self.learner.updates - versions
        metrics: dict[str, float] = {}
        if staleness.max() > self.context.config.max_staleness:
            self.dropped += 1
        else:
            terminated = arrays["terminated"][agent_id][:used]
            truncated = arrays["truncated"][agent_id][:used]
            ended = chunk["episode_ended"][:used]
            batch = Trajectory(
                agent_id=agent_id, obs=arrays["obs"][agent_id][:used], actions=arrays["actions"][agent_id][:used],
                rewards=arrays["rewards"][agent_id][:used].astype(np.float32),
                terminated=terminated, dones=terminated | truncated | ended,
                next_obs=arrays["next_obs"][agent_id][:used],
                behaviour_log_probs=extras["log_prob"][:used], staleness=staleness)
            metrics = plugin_call(self.algorithm, "learn()", self.learner.learn, batch)
            self.pool.push(self.learner.push_state())
        episodes = []
        for t, row in chunk["episodes"]:
            if t < used:  # every actor counts its own episodes: number them here
                self.tracker.episodes += 1
                episodes.append({**row, "episode": float(self.tracker.episodes)})
        self.agent.on_progress(used * n, len(episodes))
        metrics["chunks_dropped"] = float(self.dropped)
        metrics["actors_alive"] = float(getattr(self.pool, "alive", self.context.config.actors))
        return rlf.StepResult(used * n, metrics, episodes)

    def supervision_metrics(self) -> dict[str, float]:
        metrics = super().supervision_metrics()
        lost, joined = self._faults()
        metrics.update(actors_lost=float(lost), actors_joined=float(joined))
        return metrics

    def state_dict(self) -> StateTree:
        state = super().state_dict()
        state["chunks_dropped"] = self.dropped
        return state

    def teardown(self) -> None:
        pool, self.pool = getattr(self, "pool", None), None
        if pool is not None:
            try:
                pool.close()
            except Exception as exc:  # noqa: BLE001 - the run's own error, if any, is the one to report
                print(f"actor-learner: closing the actors failed: {exc}", file=sys.stderr)
        super().teardown()

"""TrainStrategy: how experience is collected and learned from. The Trainer decides when to stop,
save and log; a strategy only knows how to do one more unit of work."""

from __future__ import annotations

import math
import os
import sys
import threading
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlf.envs.base import StepBatch, VectorEnv
from rlf.envs.collectors import SYNC, Collector, build_async_collector, build_sync_collector
from rlf.envs.state import StateUnavailable, restore_vector, vector_state
from rlf.envs.workers import Supervision
from rlf.errors import RlfError, guarded, plugin_failure
from rlf.interfaces import Agent, BuildContext, EnvSpec, Learner, StateTree


@dataclass
class StepResult:
    env_steps: int
    metrics: dict[str, float] = field(default_factory=dict)
    episodes: list[dict[str, float]] = field(default_factory=list)
    """One row per episode that ended: return(s), length, env metrics."""


class TrainStrategy(ABC):
    """Registered through ``rlf_register_strategies`` and built as
    ``cls(algorithm, env_name, env_factory, context, collector)`` (``BaseStrategy`` does the common part)."""

    family: str
    """The name it is registered under (the core's own still say ``StrategyFamily.ON_POLICY`` etc.)."""

    @abstractmethod
    def setup(self) -> None: ...

    @abstractmethod
    def step(self, limit: int) -> StepResult:
        """Collect and learn one unit, doing at most about ``limit`` env steps."""

    @abstractmethod
    def weights(self) -> StateTree: ...

    @abstractmethod
    def state_dict(self) -> StateTree:
        """Everything a resume needs: agent, learner, strategy counters."""

    @abstractmethod
    def load_state_dict(self, state: StateTree) -> None: ...

    @abstractmethod
    def teardown(self) -> None: ...


WIDENED_CACHE = 256
"""Read-only reward matrices the EpisodeTracker keeps a float64 copy of."""


class EpisodeTracker:
    """Per-env running returns and lengths; emits one row per finished episode."""

    def __init__(self, agent_ids: tuple[str, ...], num_envs: int, multi_agent: bool):
        self.agent_ids = agent_ids
        self.multi_agent = multi_agent
        self.returns = np.zeros((len(agent_ids), num_envs))
        self._wide: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        """id -> (a read-only float32 reward matrix a collector hands out again, it as float64)."""
        # lengths as (steps so far - step the episode started at): no per-step array update
        self.steps = 0
        self.started = [0] * num_envs
        self.episodes = 0
        self.dropped = 0
        """Episodes cut short by a restarted env worker (at least one step taken): left out of the
        stats, counted here."""

    def update(self, batch: StepBatch, extra: dict[str, float] | None = None) -> list[dict[str, float]]:
        self.steps += 1
        rewards = batch.reward_matrix
        # Adding float32 to the float64 sums costs three times a float64 addition (numpy's casting
        # loop), and at one env that is a good part of a step's bookkeeping: collectors that hand out
        # the same read-only matrices again (ParallelVector) get them widened once. Keeping the matrix
        # referenced keeps its id from being reused.
        wide = self._wide.get(id(rewards))
        if wide is not None and wide[0] is rewards:
            self.returns += wide[1]
        elif rewards.flags.writeable or len(self._wide) >= WIDENED_CACHE:
            self.returns += rewards
        else:
            widened = rewards.astype(np.float64)
            self._wide[id(rewards)] = (rewards, widened)
            self.returns += widened
        if not batch.ended_envs:
            return []
        rows = []
        for i in batch.ended_envs:
            if i in batch.dropped:
                # the dropped step itself was never taken: an episode that had just begun lost nothing
                if self.steps - 1 > self.started[i]:
                    self.dropped += 1
                self.started[i] = self.steps
                self.returns[:, i] = 0.0
                continue
            self.episodes += 1
            returns = self.returns[:, i].tolist()
            row: dict[str, float] = {"episode": float(self.episodes), "length": float(self.steps - self.started[i])}
            if self.multi_agent:
                for a, value in zip(self.agent_ids, returns, strict=True):
                    row[f"return/{a}"] = value
                row["return"] = sum(returns) / len(returns)
            else:
                row["return"] = returns[0]
            row.update(batch.episode_metrics.get(i, {}))
            if extra:
                row.update(extra)
            rows.append(row)
            self.started[i] = self.steps
            self.returns[:, i] = 0.0
        return rows

    def state_dict(self) -> StateTree:
        return {"episodes": self.episodes}

    def load_state_dict(self, state: StateTree) -> None:
        self.episodes = int(state["episodes"])

    def inflight_state(self) -> StateTree:
        """The episodes under way: per-env running returns and lengths (for an exact resume)."""
        return {"returns": self.returns.copy(), "lengths": [self.steps - start for start in self.started],
                "dropped": self.dropped}

    def load_inflight_state(self, state: StateTree) -> None:
        returns = np.asarray(state["returns"], dtype=self.returns.dtype)
        lengths = [int(length) for length in state["lengths"]]
        if returns.shape != self.returns.shape or len(lengths) != len(self.started):
            raise ValueError(f"episode accumulators for {returns.shape} agents x envs, the run has {self.returns.shape}")
        self.returns = returns
        self.steps = 0
        self.started = [-length for length in lengths]
        self.dropped = int(state["dropped"])


def average_metrics(rows: list[dict[str, float]]) -> dict[str, float]:
    """Mean of each key over the rows that have it."""
    if rows:
        keys = rows[0].keys()
        if all(row.keys() == keys for row in rows):  # the common case (a learner reporting each step)
            return {key: math.fsum([row[key] for row in rows]) / len(rows) for key in keys}
    totals: dict[str, list[float]] = {}
    for row in rows:
        for key, value in row.items():
            totals.setdefault(key, []).append(float(value))
    return {key: math.fsum(values) / len(values) for key, values in totals.items()}


class BaseStrategy(TrainStrategy):
    """Shared plumbing: build envs, agent and learner from the registered builders."""

    def __init__(self, algorithm: Any, env_name: str, env_factory: Any, context: BuildContext,
                 collector: Collector | bool = False):
        if isinstance(collector, bool):  # the signature before collectors were plugins: subprocess or not
            collector = (Collector("async", build_async_collector) if collector
                         else Collector("sync", build_sync_collector))
        self.algorithm = algorithm
        self.env_name = env_name
        self.env_factory = env_factory
        self.context = context
        self.collector = collector
        self.envs: VectorEnv | None = None
        self.agent: Agent | None = None
        self._build: _BackgroundBuild | None = None
        self.learner: Learner | None = None
        self.obs = None
        self.tracker: EpisodeTracker | None = None
        self._pending_state: StateTree | None = None
        self._reset_count = 0
        self.restarts_used = 0
        """Env worker restarts a resumed run had used (the Trainer sets it from the checkpoint's
        counters before ``setup``), so ``run.env_restarts`` stays one budget for the whole run."""
        self._last_inflight: StateTree | None = None

    def setup(self) -> None:
        run = self.context.run
        build = None
        if self.context.env_spec is not None and self.collector.name != SYNC.name:
            # Out-of-process envs take seconds to start (8 Mario emulators) while this process only
            # waits: the agent and learner (import torch, the CNN, Adam's lazy torch._dynamo import)
            # are built meanwhile, from the spec the run's check read. In-process envs are built by
            # this process itself: nothing to overlap.
            build = _BackgroundBuild(self.algorithm, self.context)
        try:
            self.envs = self.collector(self.env_name, self.env_factory, run.num_envs)
            supervise(self.envs, run, self.algorithm, self.restarts_used)
            self.tracker = EpisodeTracker(self.envs.spec.agent_ids, run.num_envs, self.envs.spec.multi_agent)
            if build is not None and self._pending_state is None:
                # the first reset runs in the workers: overlapped with the build as well
                self.obs = self.envs.reset(seed=run.seed + 7919 * self._reset_count)
            agent = build.agent() if build is not None else None
        except BaseException:
            if build is not None:
                # the envs' error is the one to report; the build is let finish, but never waited for long
                build.wait(timeout=BUILD_WAIT_S)
            raise
        if agent is not None and not _same_spec(build.spec, self.envs.spec):
            build.wait()  # the envs turned out other than the check's probe: build for what they are
            agent = build = None
        self.context.env_spec = self.envs.spec
        if build is None:
            self.agent = plugin_call(self.algorithm, "build_agent", self.algorithm.build_agent, self.context)
            self.learner = plugin_call(self.algorithm, "build_learner", self.algorithm.build_learner, self.context,
                                       self.agent)
        else:
            # acting can start now; the learner is finished in the background and waited for where
            # it is first needed (the first update, usually a whole rollout later)
            self.agent, self._build = agent, build
        if build is not None and self._pending_state is None:
            return
        if self._pending_state is not None:
            self._restore(self._pending_state)
            inflight = self._pending_state.get("inflight")
            self._pending_state = None
            if self._restore_inflight(inflight):
                return
        # Without env state to restore, a resumed run starts fresh episodes from a new seed.
        self.obs = self.envs.reset(seed=run.seed + 7919 * self._reset_count)

    @property
    def learner(self) -> Learner | None:
        if self._build is not None:
            build, self._build = self._build, None
            self._learner = build.learner()  # the build's error, if it failed, is raised here
        return self._learner

    @learner.setter
    def learner(self, value: Learner | None) -> None:
        self._build = None
        self._learner = value

    def weights(self) -> StateTree:
        return self.learner.weights()

    def state_dict(self) -> StateTree:
        return {"agent": self.agent.state_dict(),
                "learner": self.learner.state_dict(include_replay=self.context.run.save_replay),
                "episodes": self.tracker.state_dict(),
                "resets": self._reset_count + 1,
                "inflight": self._inflight_state()}

    # -- exact resume: the episodes under way (rlf.envs.state) ----------------------------------------
    def _inflight_state(self) -> StateTree:
        """Env states, the observations to act on and the episode accumulators, or why they cannot be saved.

        Checkpoints are only written between strategy steps (a whole PPO rollout and its update, a
        chunk of off-policy steps), so nothing else of the strategy is half done."""
        if self.envs is None:  # torn down (or actor processes step the envs): what teardown kept
            return self._last_inflight or {"unavailable": "the envs are stepped in other processes"}
        try:
            envs = vector_state(self.envs)
        except StateUnavailable as exc:
            return {"unavailable": str(exc)}
        return {"envs": envs, "obs": {a: np.array(array, copy=True) for a, array in self.obs.items()},
                "episodes": self.tracker.inflight_state()}

    def _restore_inflight(self, inflight: StateTree | None) -> bool:
        """Continue the saved episodes; False (after one line saying why) where the run must start fresh ones."""
        reason = _unavailable_reason(inflight)
        if reason is None:
            try:
                restore_vector(self.envs, inflight["envs"])
                obs = {a: np.asarray(inflight["obs"][a]) for a in self.envs.spec.agent_ids}
                self.tracker.load_inflight_state(inflight["episodes"])
            except StateUnavailable as exc:
                reason = str(exc)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
                reason = f"the checkpoint's env state does not fit ({type(exc).__name__}: {exc})"
            else:
                self.obs = obs
                self._reset_count -= 1  # no new reset happened: the next resume seeds as this one would have
                return True
        say_fresh_episodes(reason)
        return False

    def load_state_dict(self, state: StateTree) -> None:
        if self.learner is None:
            self._pending_state = state
            self._reset_count = int(state.get("resets", 1))
        else:
            self._restore(state)

    def _restore(self, state: StateTree) -> None:
        from rlf.storage.run_state import (
            load_into,  # a checkpoint that does not fit is one line naming each tensor
        )

        load_into(self.agent, state["agent"], "agent", check_shapes=True)
        load_into(self.learner, state["learner"], "learner")
        load_into(self.tracker, state.get("episodes"), "episode tracker")

    def teardown(self) -> None:
        if self._build is not None:  # never waited for (a failed or interrupted start): no error twice
            build, self._build = self._build, None
            build.wait()
            self._learner = build.built_learner
        if self.learner is not None:
            self.learner.close()
        if self.envs is not None and self.tracker is not None and self.obs is not None:
            self._last_inflight = self._inflight_state()  # train() again on this object continues them
        if self.envs is not None:
            self.envs.close()
            self.envs = None


class _BackgroundBuild:
    """``build_agent`` then ``build_learner`` in a thread, in the order ``setup`` builds them in (the
    global RNG streams they draw from, and the weights, are those of a build in the main thread). The
    agent can be taken as soon as it is built, the learner later."""

    def __init__(self, algorithm: Any, context: BuildContext):
        self.spec = context.env_spec
        self.context = context
        self.algorithm = algorithm
        self.built_agent: Any = None
        self.built_learner: Any = None
        self._error: BaseException | None = None
        self._threads: int | None = None
        self._agent_done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlf-build-agent", daemon=False)
        _PENDING.add(self)
        self._thread.start()

    def _run(self) -> None:
        try:
            try:
                self.built_agent = self.algorithm.build_agent(self.context)
                torch = sys.modules.get("torch")
                if torch is not None:
                    self._threads = torch.get_num_threads()
            finally:
                self._agent_done.set()
            self.built_learner = self.algorithm.build_learner(self.context, self.built_agent)
        except BaseException as exc:  # handed to the main thread by agent() / learner()
            self._error = exc
        finally:
            _PENDING.discard(self)

    def wait(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def agent(self) -> Any:
        """The agent once built; the build's exception, raised here."""
        self._agent_done.wait()
        if self.built_agent is None:
            self.wait()
            raise _as_plugin_error(self.algorithm, "build_agent", self._error)
        torch = sys.modules.get("torch")
        if self._threads is not None and torch is not None and torch.get_num_threads() != self._threads:
            # torch's intra-op thread count is per thread (OpenMP): what the builder chose for acting
            # must hold in the thread that acts
            torch.set_num_threads(self._threads)
        return self.built_agent

    def learner(self) -> Any:
        """The learner once built; the build's exception, raised here."""
        self.wait()
        if self._error is not None:
            raise _as_plugin_error(self.algorithm, "build_learner", self._error)
        return self.built_learner


_PENDING: weakref.WeakSet[_BackgroundBuild] = weakref.WeakSet()
"""Builds whose thread is still running."""


BUILD_WAIT_S = 60.0
"""How long a failed setup waits for the agent being built in the background before it reports."""


def plugin_call(algorithm: Any, hook: str, fn: Any, *args: Any) -> Any:
    """An algorithm plugin's builder or learner call: its failure is one line naming the plugin and hook."""
    return guarded(getattr(algorithm, "plugin", "?"), f"algorithm {getattr(algorithm, 'name', '?')!r} {hook}", fn,
                   *args)


def _as_plugin_error(algorithm: Any, hook: str, error: BaseException) -> BaseException:
    if isinstance(error, RlfError | KeyboardInterrupt) or not isinstance(error, Exception | SystemExit):
        return error
    failure = plugin_failure(getattr(algorithm, "plugin", "?"), f"algorithm {getattr(algorithm, 'name', '?')!r} "
                             f"{hook}", error)
    failure.__cause__ = error
    return failure


def _finish_pending_builds() -> None:
    """Before this process forks (A3C's workers, off-policy actors): a build half done in another
    thread would be copied half done, and its thread not at all."""
    for build in list(_PENDING):
        build.wait()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_pending_builds)


def _same_spec(a: EnvSpec, b: EnvSpec) -> bool:
    try:
        return bool(a == b)
    except Exception:  # metadata values that do not compare (arrays): build again to be safe
        return False


def say_fresh_episodes(reason: str) -> None:
    """The one line a resume that cannot continue its episodes prints (not an error: today's behaviour)."""
    print(f"resume: starting fresh episodes ({reason}); exact resume needs vector=sync and envs with "
          "get_state/set_state (docs/PLUGIN_GUIDE.md)", file=sys.stderr)


def _unavailable_reason(inflight: Any) -> str | None:
    if inflight is None:
        return "the checkpoint holds no env state (written by an older rlf)"
    if not isinstance(inflight, dict):
        return "the checkpoint's env state is not a table"
    if "unavailable" in inflight:
        return f"the checkpoint holds no env state: {inflight['unavailable']}"
    return None


def supervise(envs: VectorEnv, run: Any, algorithm: Any, restarts_used: int = 0) -> None:
    """Give envs the run's worker supervision settings, the restarts already used (before a resume;
    set before the first reset, which may need one) and the name errors about actions should blame.

    Set on whatever was built (any collector), so env workers are watched however envs are made."""
    if hasattr(envs, "supervision"):
        envs.supervision = Supervision(run.env_timeout, run.env_restarts)
    if restarts_used and hasattr(envs, "restarts"):
        envs.restarts = restarts_used
    envs.acting = f"algorithm {algorithm.name!r} (plugin {algorithm.plugin})"


def build_strategy(algorithm: Any, env_name: str, env_factory: Any, context: BuildContext,
                   collector: Collector | bool, strategy: Any = None) -> TrainStrategy:
    """The strategy ``algorithm.family`` names, from ``strategy`` (a ``StrategySpec``) or the registry."""
    if strategy is None:
        from rlf.plugins.loading import registry

        strategy = registry().strategy(algorithm.family, algorithm)
    return strategy.strategy(algorithm, env_name, env_factory, context, collector)

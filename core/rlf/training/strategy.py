"""The strategy contract: ``TrainStrategy`` (how experience is collected and learned from; the Trainer
decides when to stop, save and log, a strategy only does one more unit of work) and ``BaseStrategy``,
the base the core's families and third-party strategies build on.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from typing import Any

from rlf import observations
from rlf.envs.base import VectorEnv, describe_env
from rlf.envs.collectors import SYNC, Collector
from rlf.envs.state import StateUnavailable, restore_vector, vector_state
from rlf.errors import guarded
from rlf.interfaces import Agent, BuildContext, EnvSpec, Learner, Resume, StateTree, StepResult
from rlf.training.episodes import EpisodeTracker
from rlf.training.signals import stop_pending
from rlf.training.startup import (
    BUILD_WAIT_S,
    BackgroundBuild,
    plugin_call,
    supervise,
)


class TrainStrategy(ABC):
    """Registered through ``rlf_register_strategies`` and built as
    ``cls(algorithm, env_name, env_factory, context, collector)`` (``BaseStrategy`` does the common part)."""

    family: str
    """The name it is registered under (the core's own still say ``StrategyFamily.ON_POLICY`` etc.)."""

    @abstractmethod
    def setup(self) -> None: ...

    @abstractmethod
    def step(self, limit: int) -> StepResult:
        """Collect and learn one unit (a rollout and its update, a chunk of off-policy steps).

        ``limit`` is what is left of the run's budget. Doing fewer env steps is always fine (the
        Trainer calls again); doing more is allowed where the unit cannot be split (one step of N envs
        is N env steps, a rollout of T steps of N envs is N * T) and the run then ends a little past
        ``run.steps``, but a strategy should not start a unit it could shorten to fit. The strategy
        itself calls ``EpisodeTracker.update`` after each env step and ``agent.on_progress`` (env
        steps and episodes ended since the last call); checkpoints are only taken between steps.

        A stop signal (Ctrl-C, SIGTERM) that arrives during a step is held until it returns, so a step is
        never cut short; one that can take long (a whole rollout of slow envs) may poll
        ``stop_requested()`` where its ``state_dict`` can hold the unfinished unit and return
        ``StepResult(0, partial=True)`` there (see ``StepResult.partial``)."""

    @abstractmethod
    def weights(self) -> StateTree: ...

    @abstractmethod
    def state_dict(self) -> StateTree:
        """Everything a resume needs: agent, learner, strategy counters."""

    @abstractmethod
    def load_state_dict(self, state: StateTree) -> None: ...

    @abstractmethod
    def teardown(self) -> None: ...

    def stop_requested(self) -> bool:
        """A stop signal is held: the run stops when this step returns (or sooner, see ``step``)."""
        return stop_pending()

    def fresh_episodes_reason(self) -> str | None:
        """After ``setup`` on a resume: None where the episodes under way at the checkpoint continue,
        else why fresh ones were started (``rlf.Resume.reason``). A strategy that does not restore
        episodes keeps this default."""
        return f"the {self.family!r} strategy does not restore the episodes under way"

    def on_resume(self, resume: Resume) -> None:  # noqa: B027 - optional hook
        """Training continues from a checkpoint: after ``setup``, before the first ``step``.
        ``BaseStrategy`` passes it on to the agent, the learner and the collector's vector env."""

    def resume_supervision(self, counters: dict[str, int]) -> None:
        """Before ``setup`` on a resume: the checkpoint's counters, so fault budgets (``run.env_restarts``)
        stay one budget for the whole run. A strategy without workers to supervise ignores them."""
        return None

    def supervision_counters(self) -> dict[str, int]:
        """Run-wide fault counters to checkpoint and log once there has been a fault (``env_restarts``,
        ``episodes_dropped``); none by default."""
        return {}

    def supervision_metrics(self) -> dict[str, float]:
        """What the logs show about faults: the counters, plus anything not carried across a resume
        (``actor_restarts`` of an actor pool)."""
        return {key: float(value) for key, value in self.supervision_counters().items()}


class BaseStrategy(TrainStrategy):
    """Shared plumbing: build envs, agent and learner from the registered builders.

    Order on a fresh run: ``__init__``, ``setup`` (envs from the run's collector, ``self.obs`` from
    their reset, agent and learner, ``self.tracker``), then ``step`` until the budget, ``teardown``.
    On a resume the Trainer calls ``resume_supervision`` and ``load_state_dict`` *before* ``setup``
    (the state is kept and applied once agent and learner exist, together with the episodes under way
    where the envs can restore them), then ``on_resume`` after it. A subclass usually only writes
    ``step``, reading ``self.envs``, ``self.obs``, ``self.agent``, ``self.learner`` and
    ``self.tracker``; it extends ``state_dict``/``load_state_dict`` for counters of its own."""

    def __init__(self, algorithm: Any, env_name: str, env_factory: Any, context: BuildContext,
                 collector: Collector = SYNC):
        self.algorithm = algorithm
        self.env_name = env_name
        self.env_factory = env_factory
        self.context = context
        self.collector = collector
        self.envs: VectorEnv | None = None
        self.agent: Agent | None = None
        self._build: BackgroundBuild | None = None
        self.learner: Learner | None = None
        self.obs = None
        self.tracker: EpisodeTracker | None = None
        self._pending_state: StateTree | None = None
        self._reset_count = 0
        self.restarts_used = 0
        """Env worker restarts a resumed run had used (``resume_supervision``, before ``setup``)."""
        self._dropped_before = 0
        self._last_inflight: StateTree | None = None
        self._fresh_reason: str | None = None

    def resume_supervision(self, counters: dict[str, int]) -> None:
        self.restarts_used = int(counters.get("env_restarts", 0))
        self._dropped_before = int(counters.get("episodes_dropped", 0))  # checkpoints before this counter: 0

    def supervision_counters(self) -> dict[str, int]:
        restarts = int(getattr(self.envs, "restarts", 0) or 0)  # a third-party collector may not restart
        if not restarts:
            return {}
        return {"env_restarts": restarts, "episodes_dropped": int(self.tracker.dropped if self.tracker else 0)}

    def build_on_probe(self, num_envs: int) -> EnvSpec:
        """For a strategy whose envs step elsewhere (actor processes): the spec of ``num_envs`` envs read
        from one env built here and closed, then the agent, learner and episode tracker built for it;
        a resumed run's saved state is applied as ``setup`` would (``self._pending_state`` is kept for
        the caller's own counters)."""
        probe = self.env_factory()
        try:
            spec = describe_env(self.env_name, probe, num_envs)
        finally:
            probe.close()
        self.context.env_spec = spec
        self.agent = plugin_call(self.algorithm, "build_agent", self.algorithm.build_agent, self.context)
        self.learner = plugin_call(self.algorithm, "build_learner", self.algorithm.build_learner, self.context,
                                   self.agent)
        self.tracker = EpisodeTracker(spec.agent_ids, spec.num_envs, spec.multi_agent)
        if self._pending_state is not None:
            self._restore(self._pending_state)
        return spec

    def setup(self) -> None:
        run = self.context.run
        build = None
        if self.context.env_spec is not None and self.collector.name != SYNC.name:
            # Out-of-process envs take seconds to start (8 Mario emulators) while this process only
            # waits: the agent and learner (import torch, the CNN, Adam's lazy torch._dynamo import)
            # are built meanwhile, from the spec the run's check read. In-process envs are built by
            # this process itself: nothing to overlap.
            build = BackgroundBuild(self.algorithm, self.context)
        try:
            self.envs = self.collector(self.env_name, self.env_factory, run.num_envs)
            supervise(self.envs, run, self.algorithm, self.restarts_used)
            self.tracker = EpisodeTracker(self.envs.spec.agent_ids, run.num_envs, self.envs.spec.multi_agent)
            self.tracker.dropped = self._dropped_before
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
                "learner": self.learner.state_dict(),
                "episodes": self.tracker.state_dict(),
                "resets": self._reset_count + 1,
                "inflight": self._inflight_state()}

    # -- exact resume: the episodes under way (rlf.envs.state) ----------------------------------------
    def _inflight_state(self) -> StateTree:
        """Env states, the observations to act on and the episode accumulators, or why they cannot be saved.

        Checkpoints are only written between strategy steps (a whole PPO rollout and its update, a
        chunk of off-policy steps) or where a step stopped at a stop signal and keeps its unfinished
        unit in its own state (the on-policy strategy's rollout under way)."""
        if self.envs is None:  # torn down (or actor processes step the envs): what teardown kept
            return self._last_inflight or {"unavailable": "the envs are stepped in other processes"}
        try:
            envs = vector_state(self.envs)
        except StateUnavailable as exc:
            return {"unavailable": str(exc)}
        return {"envs": envs, "obs": {a: observations.copy(array) for a, array in self.obs.items()},
                "episodes": self.tracker.inflight_state()}

    def _restore_inflight(self, inflight: StateTree | None) -> bool:
        """Continue the saved episodes; False (after one line saying why) where the run must start fresh ones."""
        reason = _unavailable_reason(inflight)
        if reason is None:
            try:
                obs = {a: self._fitting_obs(a, inflight["obs"][a]) for a in self.envs.spec.agent_ids}
                restore_vector(self.envs, inflight["envs"])
                self.tracker.load_inflight_state(inflight["episodes"])
            except StateUnavailable as exc:
                reason = str(exc)
            except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
                reason = f"the checkpoint's env state does not fit ({type(exc).__name__}: {exc})"
            else:
                self.obs = obs
                self._reset_count -= 1  # no new reset happened: the next resume seeds as this one would have
                return True
        self.start_fresh_episodes(reason)
        return False

    def _fitting_obs(self, agent: str, saved: Any) -> Any:
        """The saved observations to act on, if they are what these envs would hand the agent."""
        space = self.envs.spec.observation_spaces[agent]
        problem = observations.fits(space, saved, self.envs.num_envs)
        if problem is not None:
            raise ValueError(f"the saved observations of {agent!r} are {problem}")
        return observations.restore(space, saved)

    def start_fresh_episodes(self, reason: str) -> None:
        """A resume that cannot continue its episodes: say so once, and tell every plugin (``on_resume``)."""
        self._fresh_reason = reason
        say_fresh_episodes(reason)

    def fresh_episodes_reason(self) -> str | None:
        return self._fresh_reason

    def on_resume(self, resume: Resume) -> None:
        plugin_call(self.algorithm, "agent.on_resume", self.agent.on_resume, resume)
        plugin_call(self.algorithm, "learner.on_resume", self.learner.on_resume, resume)
        told = getattr(self.envs, "on_resume", None)  # optional for a collector's vector env
        if callable(told):
            collector = self.collector
            guarded(getattr(collector, "plugin", "rlf"), f"collector {collector.name!r} on_resume", told, resume)

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



def _same_spec(a: EnvSpec, b: EnvSpec) -> bool:
    try:
        return bool(a == b)
    except Exception:  # metadata values that do not compare (arrays): build again to be safe
        return False


def say_fresh_episodes(reason: str) -> None:
    """The one line a resume that cannot continue its episodes prints (not an error: today's behaviour)."""
    print(f"resume: starting fresh episodes ({reason}); exact resume needs vector=sync and envs with "
          "get_state/set_state (docs/plugin-guide/env-state.md)", file=sys.stderr)


def _unavailable_reason(inflight: Any) -> str | None:
    if inflight is None:
        return "the checkpoint holds no env state (written by an older rlf)"
    if not isinstance(inflight, dict):
        return "the checkpoint's env state is not a table"
    if "unavailable" in inflight:
        return f"the checkpoint holds no env state: {inflight['unavailable']}"
    return None


def build_strategy(algorithm: Any, env_name: str, env_factory: Any, context: BuildContext,
                   collector: Collector, strategy: Any = None) -> TrainStrategy:
    """The strategy ``algorithm.family`` names, from ``strategy`` (a ``StrategySpec``) or the registry."""
    if strategy is None:
        from rlf.plugins.loading import registry

        strategy = registry().strategy(algorithm.family, algorithm)
    return strategy.strategy(algorithm, env_name, env_factory, context, collector)

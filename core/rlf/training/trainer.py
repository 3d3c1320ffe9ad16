"""The Trainer: THE training loop, for every algorithm. It owns the env-step budget, checkpoints and
the metric rows; the strategy owns how experience is collected and learned from, and callbacks
(loggers among them: ``rlf.callbacks``) own where metrics go and may ask it to stop."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..callbacks import Callback
from ..config import RunConfig
from ..errors import PluginRunError, guarded
from ..finite import check_step, check_weights
from .strategy import TrainStrategy, average_metrics


class Interrupted(Exception):
    """Training was interrupted (Ctrl-C); a checkpoint was written first."""


def rng_state() -> dict[str, Any]:
    version, keys, pos, has_gauss, cached = np.random.get_state()
    return {"python": random.getstate(),
            "numpy": {"version": version, "keys": keys, "pos": pos, "has_gauss": has_gauss, "cached": cached}}


def seed_global_rngs(seed: int) -> None:
    """Python's and numpy's global generators, from the run's seed at the start of a new run: code that
    draws from them (a plugin, a library) repeats with the seed, and checkpoints hold the same state."""
    random.seed(seed)
    np.random.seed(seed % 2**32)


def set_rng_state(state: dict[str, Any]) -> None:
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    n = state["numpy"]
    np.random.set_state((n["version"], n["keys"], int(n["pos"]), int(n["has_gauss"]), float(n["cached"])))


class Trainer:
    def __init__(self, strategy: TrainStrategy, run: RunConfig, run_dir: Path,
                 save_checkpoint: Callable[..., Path | None], counters: dict[str, int] | None = None,
                 callbacks: Sequence[Callback] = (), loop: dict[str, Any] | None = None):
        self.strategy = strategy
        self.run = run
        self.run_dir = Path(run_dir)
        self.save_checkpoint = save_checkpoint
        """``save_checkpoint(state)`` writes the run's checkpoint; ``save_checkpoint(state, name)`` another
        file in the run directory (``best.rlf``). Returns the path written."""
        counters = dict(counters or {})
        # "iterations" counts strategy steps (a rollout and its update, or a chunk of off-policy env
        # steps), not learner updates; runs written before the rename call it "updates".
        if "updates" in counters:
            counters.setdefault("iterations", counters.pop("updates"))
        self.counters = {"env_steps": 0, "iterations": 0, "episodes": 0, **counters}
        self.callbacks = list(callbacks)
        self.recent: deque[dict[str, float]] = deque(maxlen=100)
        """The last 100 finished episodes (for running means)."""
        self.latest: dict[str, float] = {}
        """The metrics of the latest strategy step."""
        self.stop_reason: str | None = None
        self._pending: list[dict[str, float]] = []
        """Learner metrics since the last metrics row (averaged into the next one)."""
        self._next_log: int | None = None
        self._next_checkpoint: int | None = None
        if loop is not None:
            self._load_loop(loop)

    # -- where the loop stands between rows and checkpoints (saved, so a resume logs what the
    # uninterrupted run would have: same row steps, same running means) ------------------------------
    def loop_state(self) -> dict[str, Any]:
        return {"log_interval": self.run.log_interval, "next_log": self._next_log,
                "checkpoint_interval": self.run.checkpoint_interval, "next_checkpoint": self._next_checkpoint,
                "pending": [dict(row) for row in self._pending], "recent": [dict(row) for row in self.recent]}

    def _load_loop(self, loop: dict[str, Any]) -> None:
        from ..errors import CheckpointError

        try:
            state = _LoopState.model_validate(loop)
        except ValueError as exc:
            raise CheckpointError(f"the checkpoint's training-loop state (trainer) is unusable "
                                  f"({' '.join(str(exc).split())[:200]}); it was not written by this rlf or was edited"
                                  ) from None
        done = self.counters["env_steps"]
        # A changed interval starts its schedule afresh, from the checkpoint's step.
        if state.log_interval == self.run.log_interval and state.next_log is not None and state.next_log > done:
            self._next_log = state.next_log
        if (state.checkpoint_interval == self.run.checkpoint_interval and state.next_checkpoint is not None
                and state.next_checkpoint > done):
            self._next_checkpoint = state.next_checkpoint
        self._pending = [dict(row) for row in state.pending]
        self.recent.extend(dict(row) for row in state.recent)

    def emit(self, event: str, *args: Any) -> None:
        """Call ``event`` (``"on_eval"``...) on every callback; a callback's error stops training, as
        one line naming a plugin's callback (see ``api.Algorithm._callbacks``)."""
        for callback in self.callbacks:
            _call(callback, event, getattr(callback, event), self, *args)

    def request_stop(self, reason: str) -> None:
        """Stop after the current step (the final metrics row and checkpoint are still written)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def checkpoint(self, name: str | None = None) -> Path | None:
        self.counters.update(_supervision_counters(self.strategy))
        state = {"counters": dict(self.counters), "rng": rng_state(), "strategy": self.strategy.state_dict(),
                 "trainer": self.loop_state()}
        path = self.save_checkpoint(state) if name is None else self.save_checkpoint(state, name)
        if path is not None:
            self.emit("on_checkpoint", Path(path))
        return path

    def train(self) -> dict[str, float]:
        run, counters = self.run, self.counters
        pending = self._pending
        if self._next_log is None:
            self._next_log = counters["env_steps"] + run.log_interval
        if self._next_checkpoint is None and run.checkpoint_interval:
            self._next_checkpoint = counters["env_steps"] + run.checkpoint_interval
        window_start, window_steps = time.perf_counter(), 0
        summary: dict[str, float] = {}
        ready = finished = False
        try:
            if hasattr(self.strategy, "restarts_used"):  # see BaseStrategy; older checkpoints: none used
                self.strategy.restarts_used = int(counters.get("env_restarts", 0))
            if hasattr(self.strategy, "actor_restarts_used"):
                self.strategy.actor_restarts_used = int(counters.get("actor_restarts", 0))
            self.strategy.setup()
            _resume_supervision(self.strategy, counters)
            ready = True
            self.emit("on_start")
            while counters["env_steps"] < run.steps and self.stop_reason is None:
                result = self.strategy.step(run.steps - counters["env_steps"])
                check_step(result, counters["env_steps"] + result.env_steps, run.algorithm, self.run_dir)
                counters["env_steps"] += result.env_steps
                counters["iterations"] += 1
                window_steps += result.env_steps
                if result.metrics:
                    pending.append(result.metrics)
                    self.latest = result.metrics
                if result.episodes:
                    counters["episodes"] += len(result.episodes)
                    self.recent.extend(result.episodes)
                    self.emit("on_episode_end", [{"env_step": counters["env_steps"], **row} for row in result.episodes])
                self.emit("on_step", result)
                if (counters["env_steps"] >= self._next_log or counters["env_steps"] >= run.steps
                        or self.stop_reason is not None):
                    elapsed = time.perf_counter() - window_start
                    summary = {**average_metrics(pending), **episode_means(self.recent),
                               "env_step": counters["env_steps"], "iterations": counters["iterations"],
                               "episodes": counters["episodes"],
                               "steps_per_second": window_steps / elapsed if elapsed > 0 else 0.0}
                    check_weights(self.strategy, counters["env_steps"], run.algorithm, self.run_dir)
                    summary.update(_supervision_metrics(self.strategy))
                    self.emit("on_log", summary)
                    pending.clear()
                    window_start, window_steps = time.perf_counter(), 0
                    self._next_log = counters["env_steps"] + run.log_interval
                if self._next_checkpoint is not None and counters["env_steps"] >= self._next_checkpoint:
                    self._next_checkpoint = counters["env_steps"] + run.checkpoint_interval
                    self.checkpoint()
            self.checkpoint()
            self.emit("on_end", summary)
            finished = True
        except KeyboardInterrupt:
            if not ready:
                raise
            self.checkpoint()
            raise Interrupted(f"interrupted at env step {counters['env_steps']}; checkpoint saved, "
                              f"continue with: rlf train --resume {self.run_dir}") from None
        except PluginRunError as exc:
            if ready and exc.hook_only:  # a callback failed between steps: the training state is whole
                self._quiet_checkpoint()
            raise
        finally:
            failure = None
            for callback in self.callbacks:
                try:
                    _call(callback, "close", callback.close)
                except PluginRunError as exc:  # every callback is closed; the first failure is reported
                    failure = failure or exc
            self.strategy.teardown()
            if failure is not None and finished:
                raise failure
        return summary


    def _quiet_checkpoint(self) -> None:
        """The state as it stands, saved without telling the callbacks (one of them just failed)."""
        self.counters.update(_supervision_counters(self.strategy))
        state = {"counters": dict(self.counters), "rng": rng_state(), "strategy": self.strategy.state_dict(),
                 "trainer": self.loop_state()}
        self.save_checkpoint(state)


def _call(callback: Callback, event: str, method: Callable[..., Any], *args: Any) -> Any:
    label = getattr(callback, "_rlf_label", None)
    if label is None:  # the core's own callbacks, or ones passed to train(): their errors are as they are
        return method(*args)
    try:
        return guarded(label[0], f"{label[1]} {event}", method, *args)
    except PluginRunError as exc:
        exc.hook_only = True
        raise


class _LoopState(BaseModel):
    """The ``trainer`` part of a checkpoint, validated (a checkpoint is untrusted input)."""

    model_config = ConfigDict(extra="ignore")
    log_interval: int
    next_log: int | None
    checkpoint_interval: int
    next_checkpoint: int | None
    pending: list[dict[str, float]] = Field(max_length=1_000_000)
    recent: list[dict[str, float]] = Field(max_length=100)


def _supervision_counters(strategy: TrainStrategy) -> dict[str, int]:
    """Worker restarts and the episodes they cut short, and off-policy actors a pool restarted, once
    there has been one: checkpointed, so ``run.env_restarts`` stays a budget for the whole run across
    resumes and ``actor_restarts`` a count of it."""
    counters = {}
    restarts = int(getattr(getattr(strategy, "envs", None), "restarts", 0) or 0)
    if restarts:
        counters.update(env_restarts=restarts, episodes_dropped=int(getattr(strategy.tracker, "dropped", 0)))
    actors = int(getattr(strategy, "actor_restarts", 0) or 0)
    if actors:
        counters["actor_restarts"] = actors
    return counters


def _resume_supervision(strategy: TrainStrategy, counters: dict[str, int]) -> None:
    """Carry the episodes a resumed run had dropped (checkpoints written before this counter load as
    0); the restarts it had used reach the envs through ``BaseStrategy.restarts_used``."""
    tracker = getattr(strategy, "tracker", None)
    if tracker is not None and hasattr(tracker, "dropped"):
        # both are the run's total so far; an exact resume may have restored it with the episodes
        tracker.dropped = max(tracker.dropped, int(counters.get("episodes_dropped", 0)))


def _supervision_metrics(strategy: TrainStrategy) -> dict[str, float]:
    """Env worker restarts and the episodes they cut short (see run.env_restarts), and off-policy actors
    an actor pool restarted, once there has been one."""
    return {key: float(value) for key, value in _supervision_counters(strategy).items()}


def episode_means(rows) -> dict[str, float]:
    if not rows:
        return {}
    means = average_metrics(list(rows))
    means.pop("episode", None)
    return {f"mean_{k}" if not k.startswith("mean") else k: v for k, v in means.items()}

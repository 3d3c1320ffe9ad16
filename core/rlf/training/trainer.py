"""The Trainer: THE training loop, for every algorithm. It owns the env-step budget, checkpoints and
the metric rows; the strategy owns how experience is collected and learned from, and callbacks
(loggers among them: ``rlf.logging.callbacks``) own where metrics go and may ask it to stop."""

from __future__ import annotations

import contextlib
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rlf.config import RunConfig
from rlf.errors import CheckpointError, PluginRunError, guarded
from rlf.finite import BadObservation, check_step, check_weights, observation_error
from rlf.interfaces import Resume
from rlf.logging.callbacks import Callback
from rlf.logging.means import average_metrics, episode_means
from rlf.training.rng import rng_state
from rlf.training.signals import SHIELD as _SHIELD
from rlf.training.signals import sigint_shielded
from rlf.training.signals import sigterm_as_interrupt as sigterm_as_interrupt  # where callers have found it
from rlf.training.strategy import StepResult, TrainStrategy


class Interrupted(Exception):
    """Training was stopped by Ctrl-C (or SIGTERM under `sigterm_as_interrupt`); a checkpoint was written first."""


class Trainer:
    """The one training loop: calls ``strategy.step`` until ``run.steps`` env steps, counts, logs every
    ``run.log_interval``, checkpoints every ``run.checkpoint_interval`` and tells every callback.

    What callbacks may read and call is ``rlf.logging.callbacks.TrainerView``, which this class implements;
    the rest is its own."""

    def __init__(self, strategy: TrainStrategy, run: RunConfig, run_dir: Path,
                 save_checkpoint: Callable[..., Path | None], counters: dict[str, int] | None = None,
                 callbacks: Sequence[Callback] = (), loop: dict[str, Any] | None = None,
                 resuming: bool = False, callback_states: dict[str, Any] | None = None):
        self.strategy = strategy
        self.run = run
        self.run_dir = Path(run_dir)
        self.save_checkpoint = save_checkpoint
        """``save_checkpoint(state)`` writes the run's checkpoint; ``save_checkpoint(state, name)`` another
        file in the run directory (``best.rlf``). Returns the path written."""
        # "iterations" counts strategy steps (a rollout and its update, or a chunk of off-policy env
        # steps), not learner updates
        self.counters = {"env_steps": 0, "iterations": 0, "episodes": 0, **(counters or {})}
        self.callbacks = list(callbacks)
        self.recent: deque[dict[str, float]] = deque(maxlen=100)
        """The last 100 finished episodes (for running means)."""
        self.latest: dict[str, float] = {}
        """The metrics of the latest strategy step."""
        self.stop_reason: str | None = None
        spec = getattr(strategy, "algorithm", None)  # contract errors name the plugin behind the algorithm
        self._owner = (f"plugin {spec.plugin!r} (algorithm {spec.name!r})"
                       if getattr(spec, "plugin", None) and getattr(spec, "name", None) else None)
        self._saved_at: tuple[int, int] | None = None
        """(env steps, iterations) of the last checkpoint.rlf written: a stop right after a periodic
        checkpoint does not write (and rotate) the same state again."""
        self._pending: list[dict[str, float]] = []
        """Learner metrics since the last metrics row (averaged into the next one)."""
        self._next_log: int | None = None
        self._next_checkpoint: int | None = None
        if loop is not None:
            self._load_loop(loop)
        self.resume: Resume | None = None
        """On a run that continues from a checkpoint, what ``on_resume`` told every plugin (set before
        ``on_start``); None on a fresh run."""
        self._resuming = resuming
        self._keys = _state_keys(self.callbacks)
        self.callback_states: dict[str, Any] = dict(callback_states or {})
        """Callbacks' ``state_dict`` results by key (``logger.<name>``, ``callback.<name>``, or a Python
        callback's ``state_key``/class), as the last checkpoint saved them; states of callbacks this run
        does not select are carried on unchanged."""

    # -- where the loop stands between rows and checkpoints (saved, so a resume logs what the
    # uninterrupted run would have: same row steps, same running means) ------------------------------
    def loop_state(self) -> dict[str, Any]:
        return {"log_interval": self.run.log_interval, "next_log": self._next_log,
                "checkpoint_interval": self.run.checkpoint_interval, "next_checkpoint": self._next_checkpoint,
                "pending": [dict(row) for row in self._pending], "recent": [dict(row) for row in self.recent]}

    def _load_loop(self, loop: dict[str, Any]) -> None:
        from rlf.errors import CheckpointError

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
        with _SHIELD:
            for callback in self.callbacks:
                try:
                    _call(callback, event, getattr(callback, event), self, *args)
                except KeyboardInterrupt:
                    # a stop ended the callback's interruptible() work (an evaluation): the other callbacks
                    # still hear of this step, and the run stops where it would have checkpointed anyway
                    if not _SHIELD.take_cut():
                        raise

    def interruptible(self) -> contextlib.AbstractContextManager[None]:
        """For a callback's long work that may be cut short, such as an evaluation's episodes: a Ctrl-C or
        SIGTERM inside (or one held since the step) raises KeyboardInterrupt there at once, which ends the
        callback; the run then stops as after any other step. Elsewhere in a callback a signal waits until
        the callback returns, so a library's lock or queue is never left half-used."""
        return _SHIELD.lifted()

    def request_stop(self, reason: str) -> None:
        """Stop after the current step (the final metrics row and checkpoint are still written, and
        ``on_end`` is called: the run ended, it was not interrupted)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def checkpoint(self, name: str | None = None) -> Path | None:
        """Write the run's checkpoint, or with ``name`` (a file name ending in ``.rlf``, such as
        ``best.rlf``) another complete checkpoint beside it, which ``rlf eval`` and ``rlf.load`` read like
        the main one. Callbacks may call it from any event; ``on_checkpoint`` follows."""
        if name is not None and (not isinstance(name, str) or not _CHECKPOINT_NAME.fullmatch(name)):
            raise ValueError(f"trainer.checkpoint(name): {name!r} is not a checkpoint file name; give a plain "
                             "file name in the run directory ending in .rlf, such as 'best.rlf'")
        with _SHIELD:
            state = self._state()
            path = self.save_checkpoint(state) if name is None else self.save_checkpoint(state, name)
            if name is None:
                self._saved_at = (self.counters["env_steps"], self.counters["iterations"])
            if path is not None:
                self.emit("on_checkpoint", Path(path))
        return path

    def train(self) -> dict[str, float]:
        with sigint_shielded():
            return self._train()

    def _train(self) -> dict[str, float]:
        run, counters = self.run, self.counters
        if self._next_log is None:
            self._next_log = counters["env_steps"] + run.log_interval
        if self._next_checkpoint is None and run.checkpoint_interval:
            self._next_checkpoint = counters["env_steps"] + run.checkpoint_interval
        self._window = (time.perf_counter(), 0)
        self._summary: dict[str, float] = {}
        ready = finished = False
        whole = True  # no step under way: the state is one a checkpoint continues exactly
        try:
            self.strategy.resume_supervision(counters)
            self.strategy.setup()
            ready = True
            self._load_callback_states()
            if self._resuming:
                self._announce_resume()
            self.emit("on_start")
            while counters["env_steps"] < run.steps and self.stop_reason is None:
                # A stop signal is held until this block ends (see rlf.training.signals): the step and
                # everything a run never stopped does after it (rows, evaluation, periodic checkpoint) run
                # first, so the checkpoint the stop writes is one a periodic checkpoint here would be.
                with _SHIELD:
                    whole, self._saved_at = False, None
                    try:
                        result = self.strategy.step(run.steps - counters["env_steps"])
                    except BadObservation as bad:
                        raise observation_error(bad, counters["env_steps"], run.algorithm, self.run_dir) from None
                    if result.partial:
                        self._check_partial(result)
                    else:
                        self._absorb(result)
                    whole = True
            self.checkpoint()
            self.emit("on_end", self._summary)
            finished = True
        except KeyboardInterrupt:
            if not ready:
                raise
            with _SHIELD.handling():
                if not (whole and self._saved_at == (counters["env_steps"], counters["iterations"])):
                    self.checkpoint()
            note = "" if whole else (" (a second Ctrl-C or SIGTERM did not wait for the step to finish: the "
                                     "resume may differ from a run never stopped)")
            raise Interrupted(f"interrupted at env step {counters['env_steps']}; checkpoint saved{note}, "
                              f"continue with: rlf train --resume {self.run_dir}") from None
        except PluginRunError as exc:
            if ready and exc.hook_only:  # a callback failed between steps: the training state is whole
                self._quiet_checkpoint()
            raise
        finally:
            failure = None
            with _SHIELD.handling():
                for callback in self.callbacks:
                    try:
                        _call(callback, "close", callback.close)
                    except PluginRunError as exc:  # every callback is closed; the first failure is reported
                        failure = failure or exc
                self.strategy.teardown()
            if failure is not None and finished:
                raise failure
        return self._summary

    def _absorb(self, result: StepResult) -> None:
        """Count a finished step and tell the callbacks: episode rows, the metrics row when one is due,
        the periodic checkpoint."""
        run, counters, pending = self.run, self.counters, self._pending
        check_step(result, counters["env_steps"] + result.env_steps, run.algorithm, self.run_dir, self._owner)
        counters["env_steps"] += result.env_steps
        counters["iterations"] += 1
        self._window = (self._window[0], self._window[1] + result.env_steps)
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
            started, steps = self._window
            elapsed = time.perf_counter() - started
            summary = {**average_metrics(pending), **episode_means(self.recent),
                       "env_step": counters["env_steps"], "iterations": counters["iterations"],
                       "episodes": counters["episodes"],
                       "steps_per_second": steps / elapsed if elapsed > 0 else 0.0}
            check_weights(self.strategy, counters["env_steps"], run.algorithm, self.run_dir)
            summary.update(self.strategy.supervision_metrics())
            self.emit("on_log", summary)
            self._summary = summary
            pending.clear()
            self._window = (time.perf_counter(), 0)
            self._next_log = counters["env_steps"] + run.log_interval
        if self._next_checkpoint is not None and counters["env_steps"] >= self._next_checkpoint:
            self._next_checkpoint = counters["env_steps"] + run.checkpoint_interval
            self.checkpoint()

    def _check_partial(self, result: StepResult) -> None:
        """A step that kept its unfinished work for the checkpoint: only allowed when a stop is held."""
        if not _SHIELD.pending or result.env_steps or result.episodes or result.metrics:
            raise RuntimeError(f"the {self.strategy.family!r} strategy returned a partial step "
                               f"({'with results' if _SHIELD.pending else 'with no stop signal held'}); "
                               "StepResult(0, partial=True) is only for stopping at a held stop signal "
                               "(TrainStrategy.stop_requested)")

    def _quiet_checkpoint(self) -> None:
        """The state as it stands, saved without telling the callbacks (one of them just failed; their
        states are the last checkpoint's)."""
        self.save_checkpoint(self._state(ask_callbacks=False))

    def _state(self, ask_callbacks: bool = True) -> dict[str, Any]:
        self.counters.update(self.strategy.supervision_counters())
        if ask_callbacks:
            self._collect_callback_states()
        return {"counters": dict(self.counters), "rng": rng_state(), "strategy": self.strategy.state_dict(),
                "trainer": self.loop_state(), "callbacks": dict(self.callback_states)}

    # -- resumes and callbacks' own state --------------------------------------------------------
    def _announce_resume(self) -> None:
        reason = self.strategy.fresh_episodes_reason()
        counters = self.counters
        self.resume = Resume(env_step=counters["env_steps"], iterations=counters["iterations"],
                             episodes=counters["episodes"], episodes_restored=reason is None, reason=reason)
        self.strategy.on_resume(self.resume)
        for callback in self.callbacks:
            method = getattr(callback, "on_resume", None)  # optional: callbacks written before it exist
            if callable(method):
                _call(callback, "on_resume", method, self, self.resume)

    def _load_callback_states(self) -> None:
        for callback, key in zip(self.callbacks, self._keys, strict=True):
            method = getattr(callback, "load_state_dict", None)
            if key in self.callback_states and callable(method):
                _call(callback, "load_state_dict", method, self.callback_states[key])

    def _collect_callback_states(self) -> None:
        from rlf.storage.checkpoint import check_storable

        for callback, key in zip(self.callbacks, self._keys, strict=True):
            method = getattr(callback, "state_dict", None)
            state = _call(callback, "state_dict", method) if callable(method) else None
            if state is None:
                continue
            try:
                check_storable(state)
            except CheckpointError as exc:
                who = getattr(callback, "_rlf_label", None)
                text = f"its state_dict returned what a checkpoint cannot hold ({exc})"
                if who is None:
                    raise CheckpointError(f"callback {type(callback).__name__}: {text}") from None
                error = PluginRunError(f"plugin {who[0]!r} failed in {who[1]} state_dict: {text}; fix the plugin")
                error.hook_only = True  # the training state is whole: saved with the callbacks' last states
                raise error from None
            self.callback_states[key] = state


_CHECKPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.rlf")


def _state_keys(callbacks: Sequence[Callback]) -> list[str]:
    """Where each callback's state is kept in a checkpoint: ``logger.<name>`` / ``callback.<name>`` for
    registered ones (set by ``api.Algorithm._callbacks``), else its ``state_key`` attribute or its class,
    numbered where two share one."""
    keys: list[str] = []
    for callback in callbacks:
        key = (getattr(callback, "_rlf_state_key", None) or getattr(callback, "state_key", None)
               or f"{type(callback).__module__}.{type(callback).__qualname__}")
        base, n = str(key), 1
        while key in keys:
            n += 1
            key = f"{base}#{n}"
        keys.append(key)
    return keys


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

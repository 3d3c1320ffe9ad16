"""Callbacks: what the Trainer tells the outside world while it trains, and how the outside world
asks it to stop.

A callback overrides the events it needs; every event gets the trainer first, seen through
``TrainerView`` (its ``counters``, ``run``, ``run_dir``, ``recent`` episodes and ``latest`` metrics, and
``request_stop``, ``checkpoint``, ``emit``). Loggers (``rlf_register_loggers``:
CSV, TensorBoard, the progress bar, MLflow...) are callbacks selected by ``run.loggers``; plugins
register other callbacks with ``rlf_register_callbacks`` (selected by ``run.callbacks``) and the Python
API takes instances (``algo.train(callbacks=[...])``). Two are built in: ``PeriodicEval``
(``run.eval_interval``) and ``StopAt`` (``run.stop_at``).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rlf.config import RunConfig
    from rlf.interfaces import Resume, StateTree, StepResult



class TrainerView(Protocol):
    """What callbacks, loggers and hooks may use of the trainer that runs them (``rlf.Trainer`` is one).
    Everything else on the trainer is its own and may change between releases."""

    counters: dict[str, int]
    """``env_steps``, ``iterations`` and ``episodes`` so far (a resumed run's include the checkpoint's)."""
    run: RunConfig
    run_dir: Path
    recent: Sequence[dict[str, float]]
    """The last 100 episodes' rows, oldest first."""
    latest: dict[str, float]
    """The last learning step's metrics."""
    resume: Resume | None
    """The resume event of a resumed run (also given to ``on_resume``); None on a fresh run."""

    def request_stop(self, reason: str) -> None:
        """End the run after the current step, with a checkpoint; ``reason`` is printed and kept."""

    def checkpoint(self, name: str | None = None) -> Path | None:
        """Write a checkpoint now (``name``: beside the run's own, e.g. ``best.rlf``); its path, or None
        where the run keeps none."""

    def emit(self, event: str, *args: Any) -> None:
        """Send ``event`` (an ``on_*`` method name) to every callback, as the trainer's own events go."""

    def interruptible(self) -> AbstractContextManager[None]:
        """For long work a stop signal may cut short (an evaluation's episodes): a Ctrl-C or SIGTERM inside
        raises KeyboardInterrupt there at once; elsewhere in a callback it waits until the callback returns."""


BEST_CHECKPOINT = "best.rlf"
BEST_FILE = "best.json"


class Callback:
    """Override any of these; the defaults do nothing. Events come in this order per strategy step:
    ``on_episode_end`` (if episodes ended), ``on_step``, ``on_eval`` (from an evaluation callback),
    ``on_log`` (every ``log_interval``), ``on_checkpoint``. Before the first step: ``load_state_dict``
    and ``on_resume`` (a resumed run only), then ``on_start``. ``close`` is called even after an error."""

    def state_dict(self) -> StateTree | None:
        """What this callback needs to continue after a resume (a plateau counter, the best score so
        far), saved in every checkpoint under its key (``logger.<name>``, ``callback.<name>``, or for an
        instance passed to ``train()`` its ``state_key`` attribute, else its class). Numbers, strings,
        bools, None, numpy arrays, lists and dicts of them only (no pickles). None: nothing to save."""
        return None

    def load_state_dict(self, state: StateTree) -> None:
        """On a resume, what ``state_dict`` returned at the checkpoint (before ``on_resume``)."""

    def on_resume(self, trainer: TrainerView, resume: Resume) -> None:
        """Training continues from a checkpoint (``rlf.Resume``: its env step, and whether the episodes
        under way were restored). Rows a killed run wrote after ``resume.env_step`` are not part of the
        run any more: a logger that appends to a file cuts it back here."""

    def on_start(self, trainer: TrainerView) -> None:
        """Training starts (or resumes); the strategy is set up."""

    def on_step(self, trainer: TrainerView, result: StepResult) -> None:
        """After every strategy step; ``trainer.counters`` already count it. Keep it cheap."""

    def on_episode_end(self, trainer: TrainerView, episodes: list[dict[str, float]]) -> None:
        """Episodes that ended in this step, one row each (with ``env_step``)."""

    def on_log(self, trainer: TrainerView, metrics: dict[str, float]) -> None:
        """The metrics row written every ``log_interval`` env steps."""

    def on_eval(self, trainer: TrainerView, metrics: dict[str, float]) -> None:
        """Results of an evaluation during training (``return``, ``length``, env metrics, ``env_step``)."""

    def on_checkpoint(self, trainer: TrainerView, path: Path) -> None:
        """A checkpoint was written to ``path``."""

    def on_end(self, trainer: TrainerView, summary: dict[str, float]) -> None:
        """Training reached its budget or was stopped by a callback; the final checkpoint is written."""

    def close(self) -> None:
        """Release files and threads; called once, also when training failed or was interrupted."""


class Logger(Callback):
    """A metric sink registered through ``rlf_register_loggers``: a callback that writes somewhere."""


class PeriodicEval(Callback):
    """Evaluation every ``interval`` env steps (and at the end) on a fresh env (greedy, or as in training
    with ``run.eval_stochastic``).

    Results go to every callback's ``on_eval`` (the CSV logger writes ``eval.csv``, TensorBoard the
    tags ``eval/...``); the best mean return so far is kept as ``best.rlf`` (with ``best.json``
    saying when and how good), which ``rlf eval runs/<dir>/best.rlf`` evaluates.
    """

    def __init__(self, interval: int, episodes: int, evaluate: Callable[[int], dict[str, float]],
                 metric: str = "return"):
        self.interval = interval
        self.episodes = episodes
        self.evaluate = evaluate
        self.metric = metric
        self.next_eval = 0
        self.last_eval: int | None = None
        self.last_result: dict[str, float] | None = None
        self.best: float | None = None

    def on_start(self, trainer: TrainerView) -> None:
        steps = trainer.counters["env_steps"]
        self.next_eval = (steps // self.interval + 1) * self.interval
        best = trainer.run_dir / BEST_FILE
        if best.is_file():  # a resumed run keeps the best it had
            try:
                score = float(json.loads(best.read_text(encoding="utf-8"))[self.metric])
                self.best = score if math.isfinite(score) else None
            except (OSError, ValueError, KeyError, TypeError):
                # best.rlf is still there; only the score to beat is unknown, so the next evaluation sets it
                print(f"rlf: warning: {best} is not the record rlf writes (JSON with a finite {self.metric!r}); "
                      "the next evaluation replaces it and best.rlf", file=sys.stderr)

    def on_step(self, trainer: TrainerView, result: StepResult) -> None:
        if trainer.counters["env_steps"] >= self.next_eval:
            self._run(trainer)
            self.next_eval = (trainer.counters["env_steps"] // self.interval + 1) * self.interval

    def on_end(self, trainer: TrainerView, summary: dict[str, float]) -> None:
        if self.last_eval != trainer.counters["env_steps"]:
            self._run(trainer)

    def _run(self, trainer: TrainerView) -> None:
        steps = trainer.counters["env_steps"]
        with trainer.interruptible():  # episodes can take minutes (Mario): Ctrl-C must not wait for them
            metrics = {**self.evaluate(self.episodes), "env_step": steps}
        self.last_eval, self.last_result = steps, metrics
        trainer.emit("on_eval", metrics)
        score = metrics.get(self.metric)
        if score is not None and math.isfinite(score) and (self.best is None or score > self.best):
            self.best = score
            trainer.checkpoint(BEST_CHECKPOINT)
            from rlf.storage.checkpoint import atomic_write
            from rlf.storage.files import claim

            record = json.dumps({self.metric: score, "env_step": steps}).encode()
            atomic_write(claim(trainer.run_dir, BEST_FILE), lambda handle: handle.write(record))


class StopAt(Callback):
    """Stop training once ``metric`` reaches ``value``: ``eval/<key>`` is read from evaluations
    during training, any other name from the metrics row (e.g. ``mean_return``)."""

    PATIENCE_ROWS = 10
    """Metrics rows with episodes but without the metric before it counts as unknown: learner columns
    (a loss) appear only once updates begin, which an off-policy warm-up delays by a few rows."""

    def __init__(self, metric: str, value: float, mode: str = ">="):
        self.metric, self.value, self.mode = metric, value, mode
        self.rows_without = 0

    def _unknown(self, columns: Any, where: str) -> str:
        shown = ", ".join(sorted(k for k in columns if k != "env_step"))
        example = "eval/return" if self.metric.startswith("eval/") else "mean_return"
        return (f"stop_at.metric {self.metric!r} is not {where} (its columns: {shown}); name one of them, "
                f"e.g. --set 'stop_at={{metric=\"{example}\", value=475}}'")

    def _check(self, trainer: TrainerView, key: str, metrics: dict[str, Any]) -> None:
        found = metrics.get(key)
        if found is None or not math.isfinite(found):
            return
        if found >= self.value if self.mode == ">=" else found <= self.value:
            trainer.request_stop(f"{self.metric} = {found:.4g} {self.mode} {self.value:g} "
                                 f"at env step {trainer.counters['env_steps']}")

    def on_log(self, trainer: TrainerView, metrics: dict[str, float]) -> None:
        if self.metric.startswith("eval/"):
            return
        if self.metric not in metrics and "mean_return" in metrics:
            self.rows_without += 1
            if self.rows_without == 1:
                print(f"rlf: warning: {self._unknown(metrics, 'in the first metrics row')}", file=sys.stderr)
            elif self.rows_without >= self.PATIENCE_ROWS:
                from rlf.errors import ConfigError

                raise ConfigError(self._unknown(metrics, f"in {self.rows_without} metrics rows"))
        self._check(trainer, self.metric, metrics)

    def on_eval(self, trainer: TrainerView, metrics: dict[str, float]) -> None:
        if self.metric.startswith("eval/"):
            key = self.metric.removeprefix("eval/")
            if key not in metrics:
                from rlf.errors import ConfigError

                raise ConfigError(self._unknown({f"eval/{k}" for k in metrics}, "an evaluation result"))
            self._check(trainer, key, metrics)

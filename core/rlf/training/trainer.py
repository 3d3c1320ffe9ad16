"""The Trainer: THE training loop, for every algorithm. It owns the env-step budget, checkpoints and
stats; the strategy owns how experience is collected and learned from."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..config import RunConfig
from ..stats import CsvLog, Progress, TensorBoardWriter
from .strategy import TrainStrategy, average_metrics


class Interrupted(Exception):
    """Training was interrupted (Ctrl-C); a checkpoint was written first."""


def rng_state() -> dict[str, Any]:
    version, keys, pos, has_gauss, cached = np.random.get_state()
    return {"python": random.getstate(),
            "numpy": {"version": version, "keys": keys, "pos": pos, "has_gauss": has_gauss, "cached": cached}}


def set_rng_state(state: dict[str, Any]) -> None:
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    n = state["numpy"]
    np.random.set_state((n["version"], n["keys"], int(n["pos"]), int(n["has_gauss"]), float(n["cached"])))


class Trainer:
    def __init__(self, strategy: TrainStrategy, run: RunConfig, run_dir: Path,
                 save_checkpoint: Callable[[dict[str, Any]], None], counters: dict[str, int] | None = None):
        self.strategy = strategy
        self.run = run
        self.run_dir = Path(run_dir)
        self.save_checkpoint = save_checkpoint
        counters = dict(counters or {})
        # "iterations" counts strategy steps (a rollout and its update, or a chunk of off-policy env
        # steps), not learner updates; runs written before the rename call it "updates".
        if "updates" in counters:
            counters.setdefault("iterations", counters.pop("updates"))
        self.counters = {"env_steps": 0, "iterations": 0, "episodes": 0, **counters}

    def checkpoint(self) -> None:
        self.save_checkpoint({"counters": dict(self.counters), "rng": rng_state(),
                              "strategy": self.strategy.state_dict()})

    def train(self) -> dict[str, float]:
        run, counters = self.run, self.counters
        metrics_log = CsvLog(self.run_dir / "metrics.csv")
        episodes_log = CsvLog(self.run_dir / "episodes.csv")
        board = TensorBoardWriter(self.run_dir / "tensorboard")
        progress = Progress(run.steps, counters["env_steps"], run.progress, f"{run.algorithm} on {run.env}")
        recent: deque[dict[str, float]] = deque(maxlen=100)
        pending: list[dict[str, float]] = []
        next_log = counters["env_steps"] + run.log_interval
        next_checkpoint = counters["env_steps"] + run.checkpoint_interval if run.checkpoint_interval else None
        window_start, window_steps = time.perf_counter(), 0
        summary: dict[str, float] = {}
        ready = False
        try:
            self.strategy.setup()
            ready = True
            while counters["env_steps"] < run.steps:
                result = self.strategy.step(run.steps - counters["env_steps"])
                counters["env_steps"] += result.env_steps
                counters["iterations"] += 1
                window_steps += result.env_steps
                if result.metrics:
                    pending.append(result.metrics)
                if result.episodes:
                    counters["episodes"] += len(result.episodes)
                    recent.extend(result.episodes)
                    episodes_log.write_many([{"env_step": counters["env_steps"], **row} for row in result.episodes])
                progress.update(result.env_steps,
                                lambda: {**(pending[-1] if pending else {}), **_episode_means(recent)})
                if counters["env_steps"] >= next_log or counters["env_steps"] >= run.steps:
                    elapsed = time.perf_counter() - window_start
                    summary = {**average_metrics(pending), **_episode_means(recent),
                               "env_step": counters["env_steps"], "iterations": counters["iterations"],
                               "episodes": counters["episodes"],
                               "steps_per_second": window_steps / elapsed if elapsed > 0 else 0.0}
                    metrics_log.write(summary)
                    board.scalars(counters["env_steps"], summary)
                    pending.clear()
                    window_start, window_steps = time.perf_counter(), 0
                    next_log = counters["env_steps"] + run.log_interval
                if next_checkpoint is not None and counters["env_steps"] >= next_checkpoint:
                    self.checkpoint()
                    next_checkpoint = counters["env_steps"] + run.checkpoint_interval
            self.checkpoint()
        except KeyboardInterrupt:
            if not ready:
                raise
            self.checkpoint()
            raise Interrupted(f"interrupted at env step {counters['env_steps']}; checkpoint saved, "
                              f"continue with: rlf train --resume {self.run_dir}") from None
        finally:
            progress.close()
            metrics_log.close()
            episodes_log.close()
            board.close()
            self.strategy.teardown()
        return summary


def _episode_means(rows) -> dict[str, float]:
    if not rows:
        return {}
    means = average_metrics(list(rows))
    means.pop("episode", None)
    return {f"mean_{k}" if not k.startswith("mean") else k: v for k, v in means.items()}

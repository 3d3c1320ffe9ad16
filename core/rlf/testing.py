"""Helpers for plugins' tests: compare and check state trees (what ``state_dict`` returns) and read
the CSV logs of a run directory. Pure numpy, so every plugin's test environment has them."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np


def read_csv(path: Path) -> list[dict[str, float]]:
    """Rows of ``episodes.csv`` / ``metrics.csv`` as floats; empty cells (a column added later) left out."""
    with open(path) as handle:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(handle)]


def assert_trees_equal(a: Any, b: Any, path: str = "state") -> None:
    """Equal structure and equal values, arrays element for element; the message names the path."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_trees_equal(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_trees_equal(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def all_finite(tree: Any) -> bool:
    """No NaN or infinity in any float array or float of the tree."""
    if isinstance(tree, dict):
        return all(all_finite(v) for v in tree.values())
    if isinstance(tree, list | tuple):
        return all(all_finite(v) for v in tree)
    if isinstance(tree, np.ndarray):
        return not np.issubdtype(tree.dtype, np.floating) or bool(np.isfinite(tree).all())
    if isinstance(tree, float):
        return bool(np.isfinite(tree))
    return True


def restore_only(algo: Any) -> Any:
    """Build ``algo``'s strategy and restore its saved state into it, stopping before the first env
    step; returns the strategy (agent, learner and state as the checkpoint left them). A train target at
    the checkpoint's own step is an error (it would train nothing), so this asks for one step more
    and stops at ``on_start``; run.json's step target records that request."""
    from rlf.logging.callbacks import Callback

    class _StopAtStart(Callback):
        def on_start(self, trainer) -> None:
            trainer.request_stop("restored only")

    algo.train(steps=int(algo.counters.get("env_steps", 0)) + 1, callbacks=[_StopAtStart()])
    return algo.strategy


MASKED_CHOICE = "gym:rlf.envs.masked_choice:MaskedChoice-v0"
"""An env whose forbidden actions end the episode at once (``rlf.envs.masked_choice``)."""


def masked_choice_lengths(algorithm: str, run_dir: Path, steps: int = 3000, *overrides: str) -> tuple[list[float], float]:
    """Trains ``algorithm`` on MaskedChoice from the CLI (seed 0, sync envs, a final 10-episode greedy
    evaluation) and returns (every training episode's length, the evaluation's mean length). An agent
    that honours action masks gives only full-length episodes (10), exploring or greedy."""
    from rlf.cli.commands import main

    args = ["train", algorithm, "--env", MASKED_CHOICE, "--steps", str(steps), "--seed", "0", "--no-progress",
            "--set", "loggers=['csv']", "--set", "vector=sync", "--set", f"eval_interval={steps}",
            "--set", "eval_episodes=10", *(part for override in overrides for part in ("--set", override)),
            "--run-dir", str(run_dir)]
    if main(args) != 0:
        raise AssertionError(f"rlf {' '.join(args)} failed")
    lengths = [row["length"] for row in read_csv(run_dir / "episodes.csv")]
    return lengths, read_csv(run_dir / "eval.csv")[-1]["length"]

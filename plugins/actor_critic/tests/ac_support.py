"""Helpers shared by this plugin's tests (the other algorithm plugins keep their own copies: each
plugin's tests run with only the core and that plugin installed)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from rlf_plugin_predator_prey import capture_summary, random_play

import rlf

SPARSE = ["env.scenario='sparse-10x10'"]
ALGORITHM = "actor-critic"


def random_baseline(overrides: list[str], episodes: int = 300, seed: int = 0) -> dict[str, float]:
    """Capture rate, mean steps to capture and mean length of uniformly random learners, played
    through the env's own PettingZoo API: no rlf training machinery and no other algorithm involved."""
    resolved = rlf.resolve(ALGORITHM, "predator-prey", overrides=overrides)
    return capture_summary(random_play(resolved.env, episodes, seed))


def read_csv(path: Path) -> list[dict[str, float]]:
    with open(path) as handle:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(handle)]


def tail_stats(rows: list[dict[str, float]], count: int) -> dict[str, float]:
    """Capture rate and mean steps to capture over the last ``count`` training episodes."""
    last = rows[-count:]
    captured = [r["steps_to_capture"] for r in last if r["capture"] == 1.0]
    return {"capture": float(np.mean([r["capture"] for r in last])),
            "steps_to_capture": float(np.mean(captured)) if captured else float("inf")}


def assert_trees_equal(a, b, path: str = "state") -> None:
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


def all_finite(tree) -> bool:
    if isinstance(tree, dict):
        return all(all_finite(v) for v in tree.values())
    if isinstance(tree, list | tuple):
        return all(all_finite(v) for v in tree)
    if isinstance(tree, np.ndarray):
        return not np.issubdtype(tree.dtype, np.floating) or bool(np.isfinite(tree).all())
    if isinstance(tree, float):
        return bool(np.isfinite(tree))
    return True

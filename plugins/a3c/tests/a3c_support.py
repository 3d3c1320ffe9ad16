"""Helpers for this plugin's tests (state trees and CSVs: ``rlf.testing``; random play:
rlf-plugin-predator-prey, which the test extra installs)."""

from __future__ import annotations

import numpy as np
from rlf_plugin_predator_prey import capture_summary, random_play

import rlf
from rlf.testing import all_finite, assert_trees_equal, read_csv

SPARSE = ["env.scenario='sparse-10x10'"]
ALGORITHM = "a3c"


def random_baseline(overrides: list[str], episodes: int = 300, seed: int = 0) -> dict[str, float]:
    """Capture rate, mean steps to capture and mean length of uniformly random learners, played
    through the env's own PettingZoo API: no rlf training machinery and no other algorithm involved."""
    resolved = rlf.resolve(ALGORITHM, "predator-prey", overrides=overrides)
    return capture_summary(random_play(resolved.env, episodes, seed))


def tail_stats(rows: list[dict[str, float]], count: int) -> dict[str, float]:
    """Capture rate and mean steps to capture over the last ``count`` training episodes."""
    last = rows[-count:]
    captured = [r["steps_to_capture"] for r in last if r["capture"] == 1.0]
    return {"capture": float(np.mean([r["capture"] for r in last])),
            "steps_to_capture": float(np.mean(captured)) if captured else float("inf")}


__all__ = ["SPARSE", "all_finite", "assert_trees_equal", "random_baseline", "read_csv", "tail_stats"]

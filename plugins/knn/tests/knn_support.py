"""Test helpers: rlf-plugin-ppo's helpers for PPO extensions, with this plugin as the algorithm."""

from __future__ import annotations

from functools import partial

from rlf_plugin_ppo import testing
from rlf_plugin_ppo.testing import corridor_rollout, distinct_cells, make_rollout, whole_batch

make_context = partial(testing.make_context, algorithm="knn")

__all__ = ["corridor_rollout", "distinct_cells", "make_context", "make_rollout", "whole_batch"]

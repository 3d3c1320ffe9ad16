"""The PPO agent shipped in docs/results/agents/ still plays as the results page says.

The file is weights only (``rlf export``) and was trained before several refactors of the core, the PPO
plugin and the Mario plugin. Its greedy episode from the start every episode shares (``noop_max=0``) is
deterministic: the emulator is, and so is an argmax over the same network. The results page
(docs/results/mario-1-1.md) says that episode clears World 1-1 in about 300 agent steps (x 3,161); a change to the
observation pipeline, the model or the checkpoint loader that alters what the agent sees or does
shows up here as a stall, long before a user's `rlf eval` would.
"""

from __future__ import annotations

from pathlib import Path

from rlf import saved

# the integration env installs every plugin, Mario and PPO among them
ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "docs" / "results" / "agents" / "mario-1-1-ppo-seed0.rlf"


def test_shipped_file_is_weights_only_and_small():
    # a checkpoint of the same run holds Adam's moments too (about 3x the weights); the page says 471 KiB
    assert AGENT.stat().st_size < 600 * 1024


def test_shipped_agent_clears_1_1_greedily_from_the_shared_start():
    algo = saved.load(AGENT, overrides=["env.noop_max=0", "run.progress=false"])
    result = algo.evaluate(episodes=1)
    assert result["flag"] == 1.0, f"the shipped agent no longer clears 1-1 from the shared start: {result}"
    assert result["x_pos_max"] > 3_100
    assert result["length"] < 400

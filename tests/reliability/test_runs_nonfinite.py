"""The non-finite guard: NaN stops the run with one line naming it; it never reaches a CSV or a checkpoint."""

from __future__ import annotations

import re

import numpy as np
import pytest
from fault_support import assert_history_consistent, assert_one_line_error, make_site, rlf

from rlf.finite import first_non_finite
from rlf.storage import checkpoint as ckpt


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return make_site(tmp_path_factory.mktemp("site"))


def _train(site, run, algorithm, *extra):
    return rlf("train", algorithm, "--env", "nan-corridor", "--steps", "2000", "--no-progress",
               "--set", "log_interval=10", "--set", "checkpoint_interval=50", "--set", "env.nan_after=120",
               *extra, "--run-dir", str(run), site=site)


@pytest.mark.parametrize(("algorithm", "extra", "named"), [
    # off-policy, NaN rewards: the tabular Q-values turn NaN, or an episode's return does, whichever shows first
    ("tabular-q", (), r"(an episode's 'return'|weights\.tables\.\w+\[\d+\]\[1\]\[\d\]) is nan"),
    # on-policy, NaN rewards: the loss is NaN at the first update that sees them
    ("linear-pg", ("--set", "algo.rollout_steps=16"), r"the learner's metric 'value_loss' is nan"),
    # NaN observations: they reach the agent's state (here as table keys)
    ("tabular-q", ("--set", "env.nan_obs=true"), r"weights\.tables\.\w+\[\d+\]\[0\]\[0\] is nan"),
    # the real plugins the issue saw finish with NaN weights (dqn, iql) or write a NaN checkpoint (ppo)
    ("dqn", ("--set", "algo.min_replay_size=32", "--set", "algo.batch_size=16"), r"metric 'loss' is nan"),
    ("iql", (), r"(metric '\w+'|weights\.\S+) is nan"),
    ("ppo", ("--set", "algo.rollout_steps=32"), r"metric '\w+' is nan"),
    # NaN observations into a torch policy: named before they reach the network's sampling
    ("ppo", ("--set", "algo.rollout_steps=32", "--set", "env.nan_obs=true"),
     r"the environment's observations\.agent\[0, 0\] is nan, which the agent \(algorithm ppo\) cannot act on"),
])
def test_non_finite_values_stop_the_run_and_the_good_checkpoint_is_kept(site, tmp_path, algorithm, extra, named):
    run = tmp_path / "run"
    line = assert_one_line_error(_train(site, run, algorithm, *extra), "training stopped at env step",
                                 f"--resume {run}", code=1)
    assert re.search(named, line), line
    assert "env step" in line
    state = ckpt.load(run / "checkpoint.rlf")
    assert 0 < state["counters"]["env_steps"] < 2000
    assert first_non_finite(state, "state") is None
    assert_history_consistent(run)           # includes: no nan/inf anywhere in the CSVs
    assert "nan" not in (run / "metrics.csv").read_text().lower()


def test_first_non_finite_names_the_path_and_index():
    tree = {"agent": {"w": np.ones((2, 3)), "b": [np.zeros(2), np.array([1.0, np.inf])]}, "n": 3}
    assert first_non_finite(tree, "state") == ("state.agent.b[1][1]", float("inf"))
    tree["agent"]["w"][1, 2] = np.nan
    where, value = first_non_finite(tree, "state")
    assert where == "state.agent.w[1, 2]" and np.isnan(value)
    assert first_non_finite({"i": np.arange(3), "f": 0.5, "s": "nan"}, "x") is None

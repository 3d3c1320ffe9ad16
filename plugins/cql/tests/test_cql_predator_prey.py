"""CQL on the predator-prey env, end to end through rlf: learning, limits, curves, save/load/evaluate."""

import csv

import numpy as np
import pytest
from rlf_plugin_predator_prey import capture_summary, random_play

import rlf

# Two predators against a random prey on a 5x5 grid: 25 joint actions, a joint state of both offsets.
PAIR = ["env.size=5", "env.n_predators=2", "env.n_prey=1", "env.max_steps=50"]
# Measured on seeds 0-2 (README): alpha 0.3, epsilon x0.97 per episode; greedy captures 98-100 % in
# ~11 steps after 10k env steps and ~7.6 after 20k; random predators need ~20 (87 % captured).
BUDGET = ["steps=20000", "algo.alpha=0.3", "algo.exploration.decay=0.97", "log_interval=1000"]


def random_baseline(overrides: list[str], episodes: int = 300, seed: int = 0) -> dict[str, float]:
    """Capture rate, mean steps to capture and mean length of uniformly random learners, played
    through the env's own PettingZoo API: no rlf training machinery and no other algorithm involved."""
    resolved = rlf.resolve("cql", "predator-prey", overrides=overrides)
    return capture_summary(random_play(resolved.env, episodes, seed))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("cql")
    algo = rlf.make("cql", "predator-prey", overrides=[*PAIR, *BUDGET, "progress=false", f"run_dir='{run_dir}'"])
    algo.train()
    return algo, run_dir


@pytest.mark.slow
def test_two_cql_predators_catch_a_random_prey_much_faster_than_random_predators(trained):
    algo, _ = trained
    baseline = random_baseline(PAIR)
    result = algo.evaluate(episodes=200)
    assert result["capture"] >= max(0.95, baseline["capture"])
    assert result["steps_to_capture"] < 0.7 * baseline["steps_to_capture"]
    assert result["length"] < 0.5 * baseline["length"]
    assert {"return/predator_0", "return/predator_1", "capture", "steps_to_capture"} <= set(result)


def test_the_joint_table_is_keyed_by_both_predators_observations(trained):
    algo, run_dir = trained
    table = algo.strategy.agent.table
    state = table.state_dict()
    assert state["keys"].shape[1] == 4 and state["values"].shape == (len(table), 25)
    with open(run_dir / "episodes.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {"epsilon", "table_size", "capture"} <= set(rows[0])
    assert 0 < float(rows[0]["table_size"]) <= float(rows[-1]["table_size"]) <= len(table)
    with open(run_dir / "metrics.csv") as handle:
        assert {"td_error", "table_size"} <= set(next(csv.DictReader(handle)))


def test_save_load_evaluate_gives_the_same_greedy_policy(trained, tmp_path):
    algo, _ = trained
    again = rlf.load(algo.save(tmp_path / "cql.rlf"))
    assert again.evaluate(episodes=20, seed=5) == algo.evaluate(episodes=20, seed=5)
    twin = again.resolved.algorithm.build_agent(algo.strategy.context)
    twin.load_state_dict(again._agent_state)
    keys = np.array(list(algo.strategy.agent.table.index)[:200], dtype=np.float32)
    obs = {"predator_0": keys[:, :2], "predator_1": keys[:, 2:]}
    mine, theirs = algo.strategy.agent.act(obs, explore=False).actions, twin.act(obs, explore=False).actions
    assert all(np.array_equal(mine[a], theirs[a]) for a in obs)


def test_a_joint_space_too_large_for_memory_is_refused_before_training(tmp_path):
    algo = rlf.make("cql", "predator-prey", overrides=["env.scenario='grid-3v3'", "env.learners=all", "steps=10",
                                                      "progress=false", f"run_dir='{tmp_path}'"])
    with pytest.raises(rlf.ConfigError, match=r"15625 Q-values per state.*algo.max_joint_actions=3125") as error:
        algo.train()
    assert "\n" not in str(error.value)

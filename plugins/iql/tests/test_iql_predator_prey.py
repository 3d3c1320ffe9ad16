"""IQL on the predator-prey env, end to end through rlf: learning, curves, save/load/evaluate."""

import csv

import numpy as np
import pytest
from rlf_plugin_predator_prey import capture_summary, random_play

import rlf

SPARSE = ["env.scenario='sparse-10x10'"]
# Measured on seeds 0-2 (README): alpha 0.3 and epsilon decaying 0.97 per episode reach 98-100 % greedy
# captures in ~20 steps after 15k env steps and 100 % in ~15 steps after 25k; a random predator
# catches the random prey in ~25 % of episodes, after ~60 steps when it does.
BUDGET = ["steps=25000", "algo.alpha=0.3", "algo.exploration.decay=0.97", "log_interval=1000"]


def random_baseline(overrides: list[str], episodes: int = 200, seed: int = 0) -> dict[str, float]:
    """Capture rate, mean steps to capture and mean length of uniformly random learners, played
    through the env's own PettingZoo API: no rlf training machinery and no other algorithm involved."""
    resolved = rlf.resolve("iql", "predator-prey", overrides=overrides)
    return capture_summary(random_play(resolved.env, episodes, seed))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("iql")
    algo = rlf.make("iql", "predator-prey", overrides=[*SPARSE, *BUDGET, "progress=false", f"run_dir='{run_dir}'"])
    algo.train()
    return algo, run_dir


@pytest.mark.slow
def test_iql_predator_learns_to_catch_a_random_prey_on_the_sparse_grid(trained):
    algo, _ = trained
    baseline = random_baseline(SPARSE)
    assert baseline["capture"] < 0.5  # the scenario is hard for a random predator
    result = algo.evaluate(episodes=100)
    assert result["capture"] >= 0.8
    assert result["steps_to_capture"] < 0.6 * baseline["steps_to_capture"]
    assert result["length"] < 0.5 * baseline["length"]


def test_evaluation_reports_capture_steps_length_and_return_per_agent(trained):
    algo, _ = trained
    result = algo.evaluate(episodes=5)
    for key in ("capture", "steps_to_capture", "length", "return/predator_0", "return", "episodes"):
        assert key in result, key
    assert result["episodes"] == 5.0


def test_curves_hold_epsilon_table_size_capture_and_td_error(trained):
    _, run_dir = trained
    with open(run_dir / "episodes.csv") as handle:
        episodes = list(csv.DictReader(handle))
    assert {"epsilon", "table_size", "capture", "return/predator_0", "length"} <= set(episodes[0])
    epsilons = [float(row["epsilon"]) for row in episodes]
    # each row holds the epsilon at the episode's end: 0.97 ** (episodes that ended before it), so
    # episodes of the 8 envs that end at one step share a value
    assert epsilons[0] == 1.0 and epsilons[-1] == pytest.approx(0.05)
    for index, value in enumerate(epsilons):
        earlier = round(np.log(value) / np.log(0.97)) if value > 0.05 else None
        if earlier is not None:
            assert value == pytest.approx(0.97**earlier) and earlier <= index
    assert all(a >= b for a, b in zip(epsilons, epsilons[1:], strict=False))
    assert len(set(epsilons[:20])) > 2  # it decays per episode, not once per batch of envs
    sizes = [float(row["table_size"]) for row in episodes]
    assert 0 < sizes[0] <= sizes[-1] <= 19 * 19  # one state per (dx, dy) to the prey
    with open(run_dir / "metrics.csv") as handle:
        metrics = list(csv.DictReader(handle))
    assert {"td_error", "table_size", "epsilon"} <= set(metrics[0])
    assert all(float(row["td_error"]) > 0 for row in metrics)


def test_save_load_evaluate_gives_the_same_greedy_policy(trained, tmp_path):
    algo, _ = trained
    path = algo.save(tmp_path / "iql.rlf")
    again = rlf.load(path)
    assert again.evaluate(episodes=20, seed=3) == algo.evaluate(episodes=20, seed=3)
    spec_agent = algo.strategy.agent
    twin = again.resolved.algorithm.build_agent(algo.strategy.context)
    twin.load_state_dict(again._agent_state)
    obs = {"predator_0": np.array([[dx, dy] for dx in range(-9, 10) for dy in range(-9, 10)], dtype=np.float32)}
    mine, theirs = spec_agent.act(obs, explore=False).actions, twin.act(obs, explore=False).actions
    assert np.array_equal(mine["predator_0"], theirs["predator_0"])


def test_a_loaded_run_resumes_with_its_table_exploration_and_counters(trained, tmp_path):
    algo, run_dir = trained
    again = rlf.load(run_dir, overrides=[f"run_dir='{tmp_path}'"])
    steps_before = again.counters["env_steps"]
    again.train(steps=steps_before + 500)
    assert again.counters["env_steps"] >= steps_before + 500
    state = again.strategy.agent.state_dict()
    assert state["epsilon"]["episodes"] > algo.strategy.agent.state_dict()["epsilon"]["episodes"]
    assert len(state["tables"]["predator_0"]["keys"]) >= len(algo.strategy.agent.tables["predator_0"])


def test_bad_config_is_a_one_line_error():
    with pytest.raises(rlf.ConfigError, match=r"algo\.alpha") as error:
        rlf.make("iql", "predator-prey", overrides=["algo.alpha=0"])
    assert "\n" not in str(error.value)


def test_overlapped_actors_feed_the_learner(tmp_path):
    algo = rlf.make("iql", "predator-prey", overrides=[
        *SPARSE, "algo.actors=1", "algo.actor_sync_interval=500", "steps=3000", "progress=false",
        f"run_dir='{tmp_path}'"])
    algo.train()
    assert algo.counters["env_steps"] == 3000 and algo.counters["episodes"] > 0
    assert 0 < algo.strategy.agent.table_size <= 19 * 19

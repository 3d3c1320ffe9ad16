"""Mixed on the predator-prey env with both teams learning: CQL predators against IQL prey."""

import numpy as np
import pytest

import rlf

# Two predators (one CQL table, 25 joint actions) and one prey (an IQL table) on a 5x5 grid.
PAIR = ["env.size=5", "env.n_predators=2", "env.n_prey=1", "env.max_steps=50", "env.learners=all"]
# Measured on seeds 0-2 (README): after 20k env steps, the greedy predators catch a random prey in
# ~10.5 steps (random predators: ~20) and random predators catch the greedy prey in 45-59 % of
# episodes (random prey: 89 %).
BUDGET = ["steps=20000", "algo.alpha=0.3", "algo.exploration.decay=0.97", "log_interval=1000"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("mixed")
    algo = rlf.make("mixed", "predator-prey", overrides=[*PAIR, *BUDGET, "progress=false", f"run_dir='{run_dir}'"])
    algo.train()
    return algo


def play(algo, greedy_teams, episodes=300, seed=100):
    """Episodes through the env's PettingZoo API: the teams in ``greedy_teams`` act greedily with the
    trained agent, every other agent uniformly at random. Returns (capture rate, mean length)."""
    env = algo.resolved.environment.build_env(algo.resolved.env)
    teams = env.rlf_metadata["teams"]
    agent = algo.strategy.agent
    rng = np.random.default_rng(seed)
    captures, lengths = 0.0, []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed + episode)
        steps, infos = 0, {}
        while env.agents:
            greedy = agent.act({a: obs[a][None] for a in env.possible_agents}, explore=False).actions
            actions = {a: int(greedy[a][0]) if teams[a] in greedy_teams else int(rng.integers(5)) for a in env.agents}
            obs, _, _, _, infos = env.step(actions)
            steps += 1
        captures += next(iter(infos.values()))["episode_metrics"]["capture"]
        lengths.append(steps)
    return captures / episodes, float(np.mean(lengths))


@pytest.mark.slow
def test_both_teams_learn_in_one_run(trained):
    random_capture, random_length = play(trained, greedy_teams=set())
    hunt_capture, hunt_length = play(trained, greedy_teams={"predator"})
    evade_capture, evade_length = play(trained, greedy_teams={"prey"})
    assert hunt_capture >= 0.95 and hunt_length < 0.7 * random_length
    assert evade_capture < random_capture - 0.15 and evade_length > 1.3 * random_length


def test_training_reports_each_team(trained):
    metrics = trained.strategy.agent.metrics()
    assert metrics["table_size/predator"] > 100 and 0 < metrics["table_size/prey"] <= 81
    result = trained.evaluate(episodes=10)
    assert {"capture", "length", "return/predator_0", "return/predator_1", "return/prey_0"} <= set(result)


def test_save_load_evaluate_gives_the_same_result(trained, tmp_path):
    again = rlf.load(trained.save(tmp_path / "mixed.rlf"))
    assert again.evaluate(episodes=20, seed=9) == trained.evaluate(episodes=20, seed=9)


def test_one_learning_team_trains_alone(tmp_path):
    algo = rlf.make("mixed", "predator-prey", overrides=[
        "env.scenario='chase-1v1'", "env.learners=prey", "algo.prey='cql'", "steps=300", "progress=false",
        f"run_dir='{tmp_path}'"])
    algo.train()
    assert [(t.name, t.kind) for t in algo.strategy.agent.teams] == [("prey", "cql")]
    assert algo.strategy.agent.table_size > 0

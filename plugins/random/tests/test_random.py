import subprocess
import sys

import numpy as np
from gymnasium import spaces
from rlf_plugin_random import RandomAgent

import rlf


def test_discovered_through_its_entry_point():
    spec = rlf.registry().algorithm("random")
    assert spec.plugin == "random" and spec.family == rlf.StrategyFamily.OFF_POLICY
    assert spec.default_env == "gym:CartPole-v1"


def test_samples_inside_every_space_and_reproduces_from_its_state():
    box = spaces.Box(low=np.array([-2.0, 0.0]), high=np.array([2.0, np.inf]), dtype=np.float32)
    agent = RandomAgent({"a": spaces.Discrete(3, start=1), "b": box}, seed=7)
    obs = {"a": np.zeros((500, 1)), "b": np.zeros((500, 1))}
    state = agent.state_dict()
    first = agent.act(obs).actions
    assert set(np.unique(first["a"])) == {1, 2, 3}
    assert first["b"].shape == (500, 2) and first["b"].dtype == np.float32
    assert (first["b"][:, 0] >= -2).all() and (first["b"][:, 0] <= 2).all() and (first["b"][:, 1] >= 0).all()
    agent.load_state_dict(state)
    again = agent.act(obs).actions
    np.testing.assert_array_equal(first["a"], again["a"])
    np.testing.assert_array_equal(first["b"], again["b"])


def test_trains_evaluates_and_resumes_on_cartpole(tmp_path):
    algo = rlf.make("random", "gym:CartPole-v1", overrides=["steps=3000", "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    result = algo.evaluate(episodes=20)
    assert 12 < result["return"] < 40  # uniform random CartPole lasts about 22 steps
    resumed = rlf.load(tmp_path, overrides=["steps=5000"])
    resumed.train()
    assert 5000 <= resumed.counters["env_steps"] < 5000 + 16  # whole vector steps of 16 envs


def test_runs_on_continuous_actions(tmp_path):
    algo = rlf.make("random", "gym:Pendulum-v1", overrides=["steps=400", "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    assert algo.evaluate(episodes=1)["length"] == 200


def test_cli_leaves_a_complete_run_directory(tmp_path):
    run = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "rlf.cli.commands", "train", "random", "--env", "gym:CartPole-v1",
                             "--steps", "5000", "--run-dir", str(run), "--no-progress"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    names = {p.name for p in run.iterdir()}
    assert {"run.json", "metrics.csv", "episodes.csv", "checkpoint.rlf", "tensorboard"} <= names
    assert any((run / "tensorboard").iterdir())
    evaluated = subprocess.run([sys.executable, "-m", "rlf.cli.commands", "eval", str(run), "--episodes", "3", "--json"],
                               capture_output=True, text=True, timeout=300)
    assert evaluated.returncode == 0, evaluated.stderr
    assert '"episodes": 3.0' in evaluated.stdout


def test_plays_dict_observations_at_chance(tmp_path):
    # GoalCells pays 1 per step for the right one of 4 actions, 4 steps per episode: chance is 1.0
    algo = rlf.make("random", "gym:rlf.envs.goal_cells:GoalCells-v0",
                    overrides=["steps=1600", "seed=0", "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    result = algo.evaluate(episodes=200)
    assert 0.7 < result["return"] < 1.3 and result["length"] == 4



def test_random_play_draws_only_allowed_actions(tmp_path):
    from rlf.testing import masked_choice_lengths

    lengths, _ = masked_choice_lengths("random", tmp_path / "masked", 1000)
    # a forbidden action (4 of 6 each step) ends the episode at once with -1
    assert len(lengths) >= 90 and all(length == 10 for length in lengths)

"""The tutorial plugin learns CartPole, and a resumed run continues where the checkpoint left off."""

import numpy as np

import rlf
from rlf.testing import read_csv


def test_learns_cartpole(tmp_path):
    algo = rlf.make("reinforce", "gym:CartPole-v1",
                    overrides=["steps=40000", "seed=0", "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    returns = [row["return"] for row in read_csv(tmp_path / "episodes.csv")]
    first, last = np.mean(returns[:50]), np.mean(returns[-50:])
    assert first < 40 and last > 2 * first, (first, last)  # measured, seeds 0-2: 20-21 -> 156-184


def test_checkpoint_round_trip(tmp_path):
    algo = rlf.make("reinforce", "gym:CartPole-v1",
                    overrides=["steps=2048", "progress=false", f"run_dir='{tmp_path}'"])
    algo.train()
    resumed = rlf.load(tmp_path)
    resumed.train(steps=4096)
    assert resumed.counters["env_steps"] == 4096
    again = rlf.load(tmp_path)  # the checkpoint the resumed run wrote: the same policy acts the same
    assert again.evaluate(episodes=3, seed=5) == resumed.evaluate(episodes=3, seed=5)

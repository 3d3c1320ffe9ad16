"""Action masks (rlf.masking): DQN's epsilon-greedy acting (random draws included) and its greedy play
never choose a forbidden action of MaskedChoice (rlf.envs.masked_choice), where one ends the episode."""

from __future__ import annotations

import csv

from rlf.cli.commands import main


def test_dqn_never_takes_a_forbidden_action(tmp_path):
    run = tmp_path / "run"
    assert main(["train", "dqn", "--env", "gym:rlf.envs.masked_choice:MaskedChoice-v0", "--steps", "3000", "--seed", "0",
                 "--no-progress", "--set", "loggers=['csv']", "--set", "vector=sync", "--set", "algo.min_replay_size=200",
                 "--set", "eval_interval=3000", "--set", "eval_episodes=10", "--run-dir", str(run)]) == 0
    with open(run / "episodes.csv") as handle:
        lengths = [float(row["length"]) for row in csv.DictReader(handle)]
    with open(run / "eval.csv") as handle:
        evaluation = list(csv.DictReader(handle))[-1]
    # epsilon starts at 1: without the mask, 4 of 6 random actions would end the episode at once
    assert len(lengths) >= 250 and all(length == 10 for length in lengths)
    assert float(evaluation["length"]) == 10

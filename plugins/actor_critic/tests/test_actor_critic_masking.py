"""Action masks (rlf.masking): the agent samples and picks only allowed actions of MaskedChoice
(rlf.envs.masked_choice), where a forbidden one ends the episode with a penalty, and learns under the
same masked distribution."""

from __future__ import annotations

import csv

from rlf.cli.commands import main


def test_actor_critic_never_takes_a_forbidden_action(tmp_path):
    run = tmp_path / "run"
    assert main(["train", "actor-critic", "--env", "gym:rlf.envs.masked_choice:MaskedChoice-v0", "--steps", "3000",
                 "--seed", "0", "--no-progress", "--set", "loggers=['csv']", "--set", "vector=sync",
                 "--set", "eval_interval=3000", "--set", "eval_episodes=10", "--run-dir", str(run)]) == 0
    with open(run / "episodes.csv") as handle:
        lengths = [float(row["length"]) for row in csv.DictReader(handle)]
    with open(run / "eval.csv") as handle:
        evaluation = list(csv.DictReader(handle))[-1]
    # a near-uniform policy without the mask would end most episodes at the first step (4 of 6 forbidden)
    assert len(lengths) >= 250 and all(length == 10 for length in lengths)
    assert float(evaluation["length"]) == 10

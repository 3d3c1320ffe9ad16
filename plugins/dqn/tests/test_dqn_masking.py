"""Action masks (rlf.masking): DQN's epsilon-greedy acting (random draws included) and its greedy play
never choose a forbidden action of MaskedChoice (rlf.envs.masked_choice), where one ends the episode."""

from __future__ import annotations

from rlf.testing import masked_choice_lengths


def test_dqn_never_takes_a_forbidden_action(tmp_path):
    lengths, evaluation = masked_choice_lengths("dqn", tmp_path / "run", 3000, "algo.min_replay_size=200")
    # epsilon starts at 1: without the mask, 4 of 6 random actions would end the episode at once
    assert len(lengths) >= 250 and all(length == 10 for length in lengths)
    assert evaluation == 10

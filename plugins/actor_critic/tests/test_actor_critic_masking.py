"""Action masks (rlf.masking): the agent samples and picks only allowed actions of MaskedChoice
(rlf.envs.masked_choice), where a forbidden one ends the episode with a penalty, and learns under the
same masked distribution."""

from __future__ import annotations

from rlf.testing import masked_choice_lengths


def test_actor_critic_never_takes_a_forbidden_action(tmp_path):
    lengths, evaluation = masked_choice_lengths("actor-critic", tmp_path / "run")
    # a near-uniform policy without the mask would end most episodes at the first step (4 of 6 forbidden)
    assert len(lengths) >= 250 and all(length == 10 for length in lengths)
    assert evaluation == 10

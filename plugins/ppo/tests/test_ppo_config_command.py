"""`rlf config` runs the same compatibility check as `rlf train`: a pair that cannot train prints no config."""

from __future__ import annotations

from rlf.cli.commands import main


def test_ppo_on_box_actions_is_refused_by_config_in_one_line(capsys):
    assert main(["config", "ppo", "--env", "gym:Pendulum-v1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("rlf: error: ")
    assert "algorithm 'ppo' supports discrete action spaces" in err and "Box" in err
    assert main(["config", "ppo", "--env", "gym:CartPole-v1"]) == 0
    assert capsys.readouterr().out.startswith("[run]")

"""`rlf config` runs the same compatibility check as `rlf train` (a refused pair prints no config): PPO
takes Box actions, so its config for Pendulum is printed with the Gaussian policy's settings."""

from __future__ import annotations

from rlf.cli.commands import main


def test_ppo_config_for_box_actions_is_printed_with_the_gaussian_settings(capsys):
    assert main(["config", "ppo", "--env", "gym:Pendulum-v1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("[run]")
    assert "log_std_init = 0.0" in out and "normalize_obs = false" in out

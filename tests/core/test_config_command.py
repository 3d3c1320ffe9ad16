"""`rlf config`: every setting with its resolved value, the allowed values of a choice, and what
`--set` / `--config` would make of it; `--steps` on resume is documented as a total."""

import pytest
from core.test_cli_errors import assert_one_line_error
from core.test_plugins import run_rlf
from support import install_fake_plugin


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    install_fake_plugin(site, "test", "support:test_plugin")
    return site


def lines_of(result) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return {line.split(" = ")[0]: line for line in result.stdout.splitlines() if " = " in line}


def test_choice_fields_list_their_allowed_values(site):
    shown = lines_of(run_rlf("config", "tabular-q", "--env", "line", site=site))
    assert 'exploration.schedule = "per_episode"  # one of "per_episode", "per_step", "constant":' in shown[
        "exploration.schedule"]
    assert "# Path or null:" in shown["run_dir"]


def test_set_and_config_file_show_the_resolved_values(site, tmp_path):
    file = tmp_path / "run.toml"
    file.write_text("num_envs = 3\n[algo]\nalpha = 0.25\n")
    shown = lines_of(run_rlf("config", "tabular-q", "--env", "line", "--config", str(file),
                             "--set", "algo.exploration.schedule='per_step'", "--set", "steps=777", site=site))
    assert shown["steps"].startswith("steps = 777  #")
    assert shown["num_envs"].startswith("num_envs = 3  #")
    assert shown["alpha"].startswith("alpha = 0.25  #")
    assert shown["exploration.schedule"].startswith('exploration.schedule = "per_step"  #')


def test_set_on_an_environment_alone(site):
    shown = lines_of(run_rlf("config", "--env", "gym:CartPole-v1", "--set", "env.max_episode_steps=50", site=site))
    assert shown["id"].startswith('id = "CartPole-v1"')
    assert shown["max_episode_steps"].startswith("max_episode_steps = 50  #")
    assert_one_line_error(run_rlf("config", "--env", "gym:CartPole-v1", "--set", "algo.lr=1", site=site),
                          "name an algorithm", "algo.lr")


def test_bad_values_are_one_line_errors(site):
    assert_one_line_error(run_rlf("config", "tabular-q", "--env", "line", "--set", "algo.exploration.schedule='fast'",
                                  site=site), "algo.exploration.schedule", "per_episode")
    assert_one_line_error(run_rlf("config", "tabular-q", "--env", "line", "--set", "algo.nope=1", site=site),
                          "unknown key 'algo.nope'")


def test_resume_steps_is_documented_as_a_total():
    result = run_rlf("train", "--help")
    assert "with --resume the new total" in " ".join(result.stdout.split())


def test_a_pair_train_refuses_is_refused_by_config_too(site):
    # the same one line, exit 2, as `rlf train`: no config is printed for a pair that cannot train
    config = run_rlf("config", "tabular-q", "--env", "gym:Pendulum-v1", site=site)
    train = run_rlf("train", "tabular-q", "--env", "gym:Pendulum-v1", "--steps", "10", site=site)
    assert_one_line_error(config, "algorithm 'tabular-q' supports discrete action spaces", "Box")
    assert config.stdout == "" and config.stderr == train.stderr


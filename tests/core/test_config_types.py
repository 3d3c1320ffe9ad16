"""Config values of the wrong type are refused, wherever they come from (`--set`, a config file, an
experiment file, the Python API): a string is not a number or a boolean, and only true/false is a boolean.
What TOML cannot say otherwise stays accepted: an integer for a float, a list for a tuple, a string for a
path."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Literal

import pytest
from core.test_cli_errors import assert_one_line_error
from core.test_plugins import run_rlf
from pydantic import Field, ValidationError, field_validator
from support import install_fake_plugin

import rlf
from rlf import ConfigError, RunConfig, StrictModel
from rlf.experiments.runner import check_runs
from rlf.experiments.spec import load_experiment
from rlf.resolution import resolve

REFUSED = [
    ('steps="100"', 'steps: must be an integer, not a string (got \'100\'); write it without quotes (100, not "100")'),
    ("steps=true", "steps: must be an integer, not true/false (got True)"),
    ('algo.alpha="0.5"', "algo.alpha: must be a number, not a string (got '0.5'); write it without quotes"),
    ("algo.alpha=false", "algo.alpha: must be a number, not true/false"),
    ('algo.exploration.decay_steps="64"', "algo.exploration.decay_steps: must be an integer, not a string"),
    ('save_replay="yes"', "save_replay: must be true or false, not a string (got 'yes')."),
    ('save_replay="true"', "save_replay: must be true or false, not a string (got 'true'); write it without quotes"),
    ("save_replay=1", "save_replay: must be true or false, not an integer (got 1)"),
    ("save_replay=0.0", "save_replay: must be true or false, not a number (got 0.0)"),
    ("algo.actor_lockstep=0", "algo.actor_lockstep: must be true or false, not an integer"),
    ('env_timeout="30"', "env_timeout: must be a number, not a string"),
    ('stop_at={metric="mean_return", value="5"}', "stop_at.value: must be a number, not a string"),
]


@pytest.mark.parametrize(("override", "message"), REFUSED)
def test_set_refuses_a_value_of_the_wrong_type(registry, override, message):
    with pytest.raises(ConfigError) as err:
        resolve("tabular-q", "line", overrides=[override], registry=registry)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_numbers_and_choices_of_the_right_kind_pass(registry, tmp_path):
    resolved = resolve("tabular-q", "line", registry=registry, overrides=[
        "algo.alpha=1", "steps=1e3", "env_timeout=30", "save_replay=false", f"run_dir='{tmp_path / 'r'}'",
        'algo.exploration.schedule="per_step"', 'loggers=["csv"]', "stop_at={metric='mean_return', value=5}"])
    assert resolved.algo.alpha == 1.0 and isinstance(resolved.algo.alpha, float)  # TOML's 1 for a float
    assert resolved.run.steps == 1000 and isinstance(resolved.run.steps, int)  # a whole 1e3 for an integer
    assert resolved.run.env_timeout == 30.0 and resolved.run.save_replay is False
    assert resolved.run.run_dir == tmp_path / "r" and resolved.algo.exploration.schedule == "per_step"
    assert resolved.run.stop_at.value == 5.0
    with pytest.raises(ConfigError, match="steps: Input should be a valid integer, got a number with a fractional"):
        resolve("tabular-q", "line", overrides=["steps=1.5"], registry=registry)


def test_a_config_file_and_the_python_api_are_held_to_the_same_types(registry, tmp_path):
    file = tmp_path / "c.toml"
    file.write_text('steps = "100"\n')
    with pytest.raises(ConfigError, match="steps: must be an integer, not a string"):
        resolve("tabular-q", "line", config_file=file, registry=registry)
    file.write_text("[algo]\nalpha = 0.5\n[algo.exploration]\ndecay = \"0.9\"\n")
    with pytest.raises(ConfigError, match="algo.exploration.decay: must be a number, not a string"):
        resolve("tabular-q", "line", config_file=file, registry=registry)
    with pytest.raises(ConfigError, match="save_replay: must be true or false, not an integer"):
        rlf.make("tabular-q", "line", registry=registry, config={"run": {"save_replay": 1}})
    with pytest.raises(ConfigError, match="algo.alpha: must be a number, not a string"):
        rlf.make("tabular-q", "line", registry=registry, config={"algo": {"alpha": "0.5"}})
    run = RunConfig(algorithm="a", env="b")
    with pytest.raises(ValidationError, match="must be an integer, not a string"):
        run.steps = "100"  # assignment is validated too
    with pytest.raises(ValidationError, match="must be true or false, not an integer"):
        RunConfig(algorithm="a", env="b", progress=0)


def test_an_experiment_file_is_held_to_the_same_types(registry, tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(f'[experiment]\nenv = "line"\nsteps = 100\nruns_dir = "{tmp_path / "runs"}"\n'
                    '[algorithms.tabular-q.algo]\nalpha = "0.5"\n')
    with pytest.raises(ConfigError, match="algo.alpha: must be a number, not a string"):
        check_runs(load_experiment(path), registry=registry)
    assert not (tmp_path / "runs").exists()


class _Mode(Enum):
    FAST = "fast"


class _PluginSettings(StrictModel):
    """What a plugin's config may hold besides numbers and booleans."""

    sizes: tuple[int, ...] = (1,)
    where: Path | None = None
    mode: _Mode = _Mode.FAST
    kind: Literal["a", "b"] = "a"
    limit: int | Literal["auto"] = "auto"
    name: str = "x"
    actions: str = Field("SIMPLE")

    @field_validator("actions", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


def test_a_plugin_config_keeps_what_toml_cannot_say_otherwise():
    settings = _PluginSettings.model_validate({"sizes": [64, 64], "where": "out/x", "mode": "fast", "kind": "b",
                                               "limit": 3, "actions": "right_only"})
    assert settings.sizes == (64, 64) and settings.where == Path("out/x") and settings.mode is _Mode.FAST
    assert settings.kind == "b" and settings.limit == 3 and settings.actions == "RIGHT_ONLY"
    assert _PluginSettings.model_validate({"limit": "auto"}).limit == "auto"
    for bad in ({"sizes": ["64"]}, {"limit": "3"}, {"limit": True}, {"name": 3}):
        with pytest.raises(ValidationError):
            _PluginSettings.model_validate(bad)
    # the guards change validation only: the JSON schema (the docs' tables) is pydantic's own
    assert _PluginSettings.model_json_schema()["properties"]["sizes"]["items"] == {"type": "integer"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    install_fake_plugin(site, "test", "support:test_plugin")
    return site


def test_the_command_line_refuses_a_quoted_number_with_one_line(site, tmp_path):
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "line", "--set", 'algo.alpha="0.5"',
                                  "--run-dir", str(tmp_path / "run"), site=site),
                          "algo.alpha: must be a number, not a string (got '0.5')", "without quotes")
    assert not (tmp_path / "run").exists()

"""Config fields, scenario presets and the validation errors the core turns into one-line messages."""

import pytest
from pydantic import ValidationError
from rlf_plugin_predator_prey import SCENARIOS, PredatorPreyConfig

import rlf


def test_every_field_is_typed_and_documented():
    for model in (PredatorPreyConfig, PredatorPreyConfig.model_fields["rewards"].annotation):
        for name, field in model.model_fields.items():
            assert field.description and "\n" not in field.description, name
            assert field.annotation is not None, name


def test_defaults_predators_learn_against_random_prey():
    config = PredatorPreyConfig()
    assert (config.learners, config.opponent_policy, config.scenario) == ("predators", "random", "custom")


@pytest.mark.parametrize("name", ["chase-1v1", "grid-3v3", "sparse-10x10"])
def test_scenario_presets_fill_defaults(name):
    config = PredatorPreyConfig(scenario=name)
    for key, value in SCENARIOS[name].items():
        assert getattr(config, key) == value


def test_scenario_presets():
    chase = PredatorPreyConfig(scenario="chase-1v1")
    assert (chase.size, chase.predator_speed, chase.prey_speed, chase.n_predators, chase.n_prey) == (5, 2, 1, 1, 1)
    grid = PredatorPreyConfig(scenario="grid-3v3")
    assert (grid.size, grid.n_predators, grid.n_prey) == (10, 3, 3) and grid.n_obstacles > 0
    sparse = PredatorPreyConfig(scenario="sparse-10x10")
    assert (sparse.size, sparse.n_predators, sparse.n_prey, sparse.max_steps) == (10, 1, 1, 100)


def test_user_fields_win_over_the_preset():
    config = PredatorPreyConfig(scenario="grid-3v3", size=12, capture_threshold=1)
    assert (config.size, config.capture_threshold, config.n_predators) == (12, 1, 3)


def test_checkpoint_round_trip_keeps_the_config():
    config = PredatorPreyConfig(scenario="chase-1v1", prey_speed=2)
    again = PredatorPreyConfig.model_validate(config.model_dump(mode="json"))
    assert again == config


@pytest.mark.parametrize(("fields", "message"), [
    ({"size": 2, "n_prey": 4}, "need more than the 4 cells"),
    ({"size": 4, "n_predators": 4, "n_prey": 5, "obstacle_share": 0.5}, "8 obstacles"),
    ({"n_prey": 2, "capture_threshold": 3}, "capture_threshold 3 is above n_prey 2"),
    ({"obs_opponents": 2}, "obs_opponents 2"),
    ({"n_predators": 2, "obs_teammates": 2}, "obs_teammates 2"),
    ({"obs_opponents": 0}, "observation is empty"),
    ({"size": 4, "min_start_distance": 7}, "min_start_distance 7"),
    ({"scenario": "maze"}, "scenario"),
    ({"size": 1}, "size"),
    ({"size": 65}, "size"),
    ({"obstacle_share": 0.9}, "obstacle_share"),
    ({"learners": "everyone"}, "learners"),
    ({"opponent_policy": "smart"}, "opponent_policy"),
    ({"predator_speed": 0}, "predator_speed"),
    ({"max_steps": 0}, "max_steps"),
    ({"rewards": {"capture": "lots"}}, "capture"),
    ({"n_predator": 2}, "n_predator"),
])
def test_invalid_configs_raise_validation_errors(fields, message):
    with pytest.raises(ValidationError, match=message):
        PredatorPreyConfig(**fields)


def test_prey_learners_need_predators_to_observe():
    PredatorPreyConfig(n_predators=3, learners="prey", obs_opponents=3)
    with pytest.raises(ValidationError, match="obs_opponents 3"):
        PredatorPreyConfig(n_predators=3, learners="predators", obs_opponents=3)


def test_core_reports_one_line_config_errors(only_our_plugins):
    with pytest.raises(rlf.ConfigError) as error:
        rlf.make("random", "predator-prey", overrides=["env.size=3", "env.n_predators=5", "env.n_prey=5"])
    text = str(error.value)
    assert "\n" not in text and "9 cells" in text
    with pytest.raises(rlf.ConfigError, match="env.max_steps"):
        rlf.make("random", "predator-prey", overrides=["env.max_steps=-1"])
    with pytest.raises(rlf.ConfigError, match="unknown key 'env.sise'"):
        rlf.make("random", "predator-prey", overrides=["env.sise=4"])

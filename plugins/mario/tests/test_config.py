import pickle

import pytest
from pydantic import ValidationError
from rlf_plugin_mario.config import MarioConfig

import rlf
from rlf import ConfigError, EnvConfig


def test_defaults_are_the_standard_preprocessing():
    config = MarioConfig()
    assert isinstance(config, EnvConfig)
    assert (config.world, config.stage, config.rom, config.actions) == (1, 1, "standard", "SIMPLE_MOVEMENT")
    assert (config.frame_skip, config.max_pool, config.grayscale, config.resize, config.frame_stack) == (
        4, True, True, 84, 4)
    assert config.levels == [(1, 1)]
    assert not config.reward_shaping and not config.episodic_life and config.max_episode_steps is None


def test_every_field_is_typed_and_documented_in_one_line():
    for name, field in MarioConfig.model_fields.items():
        assert field.annotation is not None, name
        assert field.description and "\n" not in field.description, name


@pytest.mark.parametrize("fields", [
    {"world": 9}, {"world": 0}, {"stage": 5}, {"stage": 0},
    {"rom": "vanilla"}, {"actions": "ALL"}, {"frame_skip": 0}, {"frame_skip": 17},
    {"resize": -1}, {"resize": 241}, {"frame_stack": 0}, {"noop_max": -1},
    {"max_episode_steps": 0}, {"interpolation": "cubic"}, {"shaping_score_divisor": 0},
    {"shaping_scale": -1.0}, {"shaping_flag_bonus": -1.0}, {"unknown_key": 1},
    {"stages": ["1-1"]},                                   # stages without random_stages
    {"random_stages": True, "stages": ["9-1"]},
    {"random_stages": True, "stages": ["1-1", "1-1"]},
    {"random_stages": True, "full_game": True},
    {"full_game": True, "world": 2},
    {"episodic_life": True},                               # a single level ends at the first death anyway
    {"grayscale": "maybe"},
])
def test_invalid_values_are_validation_errors(fields):
    with pytest.raises(ValidationError):
        MarioConfig(**fields)


def test_invalid_override_is_a_config_error_through_the_core():
    with pytest.raises(ConfigError, match="world"):
        rlf.resolve("random", "mario", overrides=["env.world=9"])
    resolved = rlf.resolve("random", "mario", overrides=["env.world=4", "env.stage=2", "env.actions=right_only"])
    assert resolved.env.levels == [(4, 2)] and resolved.env.actions == "RIGHT_ONLY"


def test_level_sets():
    assert len(MarioConfig(random_stages=True).levels) == 32
    assert MarioConfig(random_stages=True, stages=["1-1", "8-4"]).levels == [(1, 1), (8, 4)]
    assert MarioConfig(full_game=True, episodic_life=True).levels == []


def test_config_pickles():
    config = MarioConfig(world=2, random_stages=False, reward_shaping=True, max_episode_steps=100)
    assert pickle.loads(pickle.dumps(config)) == config

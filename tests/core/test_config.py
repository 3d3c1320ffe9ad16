import pytest

from rlf import ConfigError, RunConfig, StrategyFamily, hookimpl
from rlf.config import load_toml, parse_overrides, parse_value
from rlf.resolution import resolve


def test_values_parse_as_toml_else_string():
    assert parse_value("3") == 3
    assert parse_value("2.5e-4") == 2.5e-4
    assert parse_value("true") is True
    assert parse_value("[64, 64]") == [64, 64]
    assert parse_value("hello") == "hello"
    assert parse_value('"quoted"') == "quoted"


def test_overrides_route_to_sections_and_nest():
    layered = parse_overrides(["steps=10", "algo.exploration.decay=0.9", "env.length=7", "run.seed=3"])
    assert layered["run"] == {"steps": 10, "seed": 3}
    assert layered["algo"] == {"exploration": {"decay": 0.9}}
    assert layered["env"] == {"length": 7}


def test_malformed_override_is_a_config_error():
    with pytest.raises(ConfigError, match="expected key=value"):
        parse_overrides(["steps"])


def test_layering_defaults_file_then_overrides(tmp_path, registry):
    config = tmp_path / "c.toml"
    config.write_text("steps = 50\n[algo]\nalpha = 0.2\ngamma = 0.5\n[env]\nlength = 9\n")
    resolved = resolve("tabular-q", "line", config_file=config, overrides=["algo.alpha=0.3"], registry=registry)
    assert resolved.run.steps == 50
    assert resolved.algo.alpha == 0.3        # --set beats the file
    assert resolved.algo.gamma == 0.5        # the file beats the default
    assert resolved.env.length == 9
    assert resolved.algo.exploration.start == 1.0  # untouched default


def test_algorithm_run_defaults_sit_below_user_settings(tmp_path):
    from support import TestPlugin

    from rlf import OffPolicyConfig
    from rlf.plugins import load_registry

    class Prefers8:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_algorithms(self, register):
            register("eight", build_agent="support:build_tabular_agent", build_learner="support:build_tabular_learner",
                     family=StrategyFamily.OFF_POLICY, config=OffPolicyConfig, run_defaults={"num_envs": 8})

    registry = load_registry(extra_plugins=[("t", TestPlugin()), ("eight", Prefers8())])
    assert resolve("eight", "line", registry=registry).run.num_envs == 8
    assert resolve("eight", "line", overrides=["num_envs=2"], registry=registry).run.num_envs == 2
    config = tmp_path / "c.toml"
    config.write_text("num_envs = 3\n")
    assert resolve("eight", "line", config_file=config, registry=registry).run.num_envs == 3
    assert resolve("linear-pg", "line", registry=registry).run.num_envs == 1


def test_unknown_key_names_the_path_and_suggests(registry):
    with pytest.raises(ConfigError) as err:
        resolve("tabular-q", "line", overrides=["algo.alpah=0.1"], registry=registry)
    message = str(err.value)
    assert "algo.alpah" in message and "did you mean algo.alpha" in message
    assert "\n" not in message


def test_out_of_range_and_mistyped_values_name_the_field(registry):
    with pytest.raises(ConfigError, match=r"algo\.alpha: .*greater than 0"):
        resolve("tabular-q", "line", overrides=["algo.alpha=-1"], registry=registry)
    with pytest.raises(ConfigError, match=r"algo\.exploration\.decay"):
        resolve("tabular-q", "line", overrides=["algo.exploration.decay=fast"], registry=registry)
    with pytest.raises(ConfigError, match=r"num_envs"):
        resolve("tabular-q", "line", overrides=["num_envs=0"], registry=registry)


def test_unknown_run_key_and_section(registry):
    with pytest.raises(ConfigError, match="unknown key 'stepz'.*did you mean steps"):
        resolve("tabular-q", "line", overrides=["stepz=3"], registry=registry)


def test_malformed_toml_is_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[algo\nlr = ")
    with pytest.raises(ConfigError, match="not valid TOML") as err:
        load_toml(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="does not exist"):
        load_toml(tmp_path / "missing.toml")
    wrong = tmp_path / "wrong.toml"
    wrong.write_text("[agent]\nx = 1\n")
    with pytest.raises(ConfigError, match="unknown table"):
        load_toml(wrong)


def test_device_is_validated():
    with pytest.raises(Exception, match="cuda"):
        RunConfig(algorithm="a", env="b", device="gpu0")
    assert RunConfig(algorithm="a", env="b", device="cuda:1").device == "cuda:1"


def test_gym_prefix_fills_the_id(registry):
    resolved = resolve("linear-pg", "gym:Acrobot-v1", registry=registry)
    assert resolved.env.id == "Acrobot-v1"
    assert resolve("linear-pg", registry=registry).run.env == "gym:CartPole-v1"  # the algorithm's default env


def test_every_field_is_documented(registry):
    from rlf.config import describe

    for model in (RunConfig, registry.algorithm("tabular-q").config, registry.environment("gym:").config):
        for path, _type, _default, doc in describe(model):
            assert doc, f"{model.__name__}.{path} has no description"


def test_a_config_can_refuse_settings_that_conflict_with_the_run(tmp_path):
    """``AlgorithmConfig.check_run``: a cross-section check, refused as the settings resolve (before any run
    directory); one that raises is the plugin's one-line failure."""
    from support import TabularQConfig, TestPlugin

    from rlf.errors import PluginError
    from rlf.plugins import load_registry

    class EvenEnvs(TabularQConfig):
        def check_run(self, run):
            if self.fail_after == 99:
                raise RuntimeError("boom")
            return None if run.num_envs % 2 == 0 else f"run.num_envs={run.num_envs} must be even; use 2 or 4"

    class Even:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_algorithms(self, register):
            register("even-q", build_agent="support:build_tabular_agent",
                     build_learner="support:build_tabular_learner", family=StrategyFamily.OFF_POLICY, config=EvenEnvs)

    registry = load_registry(extra_plugins=[("t", TestPlugin()), ("even", Even())])
    assert resolve("even-q", "line", overrides=["num_envs=2"], registry=registry).run.num_envs == 2
    with pytest.raises(ConfigError, match=r"^run.num_envs=3 must be even; use 2 or 4$"):
        resolve("even-q", "line", overrides=["num_envs=3"], registry=registry)
    with pytest.raises(PluginError, match="config.check_run") as failed:
        resolve("even-q", "line", overrides=["num_envs=2", "algo.fail_after=99"], registry=registry)
    assert "boom" in str(failed.value) and "\n" not in str(failed.value)

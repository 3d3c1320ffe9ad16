"""The strategy hook: on-policy/off-policy are default plugins, the old StrategyFamily values are
aliases, an algorithm names its family by name, and a third-party strategy (with a third-party
collector) trains through `rlf train` with no core change."""

import csv
import json

import pytest
from support import LinearPGConfig, TestPlugin, build_linear_agent, build_linear_learner, install_fake_plugin
from test_plugins import run_rlf
from third_party_plugin import ThirdPartyPlugin

import rlf
from rlf import PluginError, StrategyFamily, UnknownNameError, hookimpl
from rlf.api import make
from rlf.plugins import load_registry


@pytest.fixture(scope="module")
def reg():
    return load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("third-party", ThirdPartyPlugin())])


def test_the_core_strategies_are_registered_through_the_hook_and_the_enum_names_them(reg):
    assert reg.plugins["rlf"].strategies == ["on-policy", "off-policy"]
    assert "rlf_register_strategies" in reg.plugins["rlf"].hooks
    assert reg.strategy(StrategyFamily.ON_POLICY).name == "on-policy"
    assert reg.strategy("off_policy").name == reg.strategy("off-policy").name == "off-policy"
    assert reg.strategies["on-policy"].config is rlf.OnPolicyConfig
    assert reg.strategy("monte-carlo").plugin == "third-party"
    assert reg.algorithm("linear-pg").family == StrategyFamily.ON_POLICY


def test_the_enum_values_are_the_registered_names_and_the_old_spellings_still_work(reg):
    assert StrategyFamily.OFF_POLICY == "off-policy" and StrategyFamily.ON_POLICY == "on-policy"
    assert set(StrategyFamily) <= set(reg.strategies)
    # a plugin written against the underscore values registers the family by its registered name
    registered = _registry_with("off_policy")
    assert registered.algorithm("x").family == "off-policy"


def test_an_algorithm_runs_on_the_strategy_its_family_names(reg, tmp_path):
    algo = make("linear-mc", "line", registry=reg,
                overrides=["steps=96", "num_envs=2", "algo.rollout_steps=8", "progress=false", f"run_dir='{tmp_path}'"])
    assert algo.resolved.strategy.name == "monte-carlo"
    summary = algo.train()
    assert type(algo.strategy).__name__ == "MonteCarloStrategy"
    assert algo.strategy.rollouts == 6 and algo.counters["env_steps"] == 96  # 6 rollouts of 8 steps x 2 envs
    assert summary["mc_rollouts"] == 3.5  # the metrics row averages what each of the 6 steps reported
    assert algo.strategy.learner.seen_rollouts == [16] * 6
    resumed = rlf.load(tmp_path, registry=reg)
    resumed.train(steps=128, progress=False)
    assert resumed.counters["env_steps"] == 128 and resumed.strategy.learner.updates == 8


def _registry_with(algorithm_family, config=LinearPGConfig, strategies=None):
    class Plugin:
        RLF_API_VERSION = rlf.API_VERSION

        @hookimpl
        def rlf_register_algorithms(self, register):
            register("x", build_agent=build_linear_agent, build_learner=build_linear_learner,
                     family=algorithm_family, config=config)

    class StrategyPlugin:
        RLF_API_VERSION = rlf.API_VERSION

        @hookimpl
        def rlf_register_strategies(self, register):
            for name, kwargs in (strategies or {}).items():
                register(name, **kwargs)

    return load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("x", Plugin()), ("s", StrategyPlugin())])


def test_an_unknown_family_is_a_one_line_error_when_the_algorithm_is_used():
    reg = _registry_with("on-polcy")
    assert reg.plugins["x"].error is None  # the strategy's plugin may simply not be installed (yet)
    with pytest.raises(UnknownNameError) as caught:
        make("x", "line", registry=reg)
    message = str(caught.value)
    assert "\n" not in message and "algorithm 'x' needs unknown strategy 'on-polcy'" in message
    assert "did you mean 'on-policy'" in message and "off-policy, on-policy" in message


def test_an_algorithm_whose_config_does_not_extend_its_strategys_settings_is_named():
    reg = _registry_with("monte", strategies={"monte": {"strategy": "third_party_strategy:MonteCarloStrategy",
                                                        "config": rlf.OffPolicyConfig}})
    with pytest.raises(PluginError, match=r"algorithm 'x' .* strategy 'monte', whose settings are OffPolicyConfig, "
                                          r"but its config LinearPGConfig does not subclass it"):
        make("x", "line", registry=reg)


@pytest.mark.parametrize(("name", "kwargs", "error"), [
    ("on_policy", {"strategy": "a:B"}, "reserved"),
    ("mine", {"strategy": "a:B", "config": rlf.EnvConfig}, "must subclass rlf.AlgorithmConfig"),
    ("mine", {"strategy": 3}, "must be a TrainStrategy class"),
    ("on-policy", {"strategy": "a:B"}, "strategy 'on-policy' is already registered by plugin 'rlf' (the core)"),
])
def test_bad_strategy_registrations_are_plugin_errors(name, kwargs, error):
    reg = _registry_with("on-policy", strategies={name: kwargs})
    assert error in reg.plugins["s"].error


def test_a_third_party_strategy_and_collector_train_through_rlf_train(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_fake_plugin(site, "test", "support:test_plugin")
    install_fake_plugin(site, "third-party", "third_party_plugin:plugin")
    listing = run_rlf("list", site=site, check=True).stdout
    assert "monte-carlo" in listing[listing.index("strategies:"):listing.index("collectors")]
    assert "linear-mc      monte-carlo" in listing
    plugins = run_rlf("plugins", site=site, check=True).stdout
    assert "provides: linear-mc, strategy monte-carlo, collector counting" in plugins  # the third-party plugin
    assert "strategy on-policy, strategy off-policy, collector sync, collector async, logger csv" in plugins
    report = tmp_path / "report.json"
    run_rlf("train", "linear-mc", "--env", "line", "--steps", "64", "--no-progress", "--set", "num_envs=2",
            "--set", "algo.rollout_steps=8", "--set", "vector=counting", "--set", f"collector.report='{report}'",
            "--run-dir", str(tmp_path / "run"), site=site, check=True)
    with open(tmp_path / "run" / "metrics.csv") as handle:
        last = list(csv.DictReader(handle))[-1]
    assert float(last["mc_rollouts"]) == 2.5 and float(last["env_step"]) == 64  # mean of 1..4: 4 rollouts
    assert json.loads(report.read_text())["steps"] == 32


def test_the_on_policy_settings_have_no_async_workers():
    """A3C's workers are its own strategy's setting: asking the core's on-policy family for them is an error."""
    from pydantic import ValidationError

    assert "async_workers" not in LinearPGConfig().model_dump()
    for value in (0, 2):
        with pytest.raises(ValidationError, match="async_workers"):
            LinearPGConfig.model_validate({"async_workers": value})

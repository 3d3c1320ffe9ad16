"""The collector hook: sync/async are default plugins, a third-party collector is selected with
``run.vector`` and configured through the ``[collector]`` section, bad names and settings are one-line
errors, and a collector that breaks the VectorEnv contract is named at setup."""

import csv
import json

import pytest
from support import TestPlugin, install_fake_plugin
from test_plugins import run_rlf
from third_party_plugin import ThirdPartyPlugin

import rlf
from rlf import ConfigError, PluginError, UnknownNameError, hookimpl
from rlf.api import make
from rlf.plugins import load_registry


@pytest.fixture(scope="module")
def reg():
    return load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("third-party", ThirdPartyPlugin())])


def test_sync_and_async_are_registered_by_the_core_through_the_hook(reg):
    assert {"sync", "async"} <= set(reg.collectors)
    assert reg.collectors["sync"].plugin == "rlf" and reg.collectors["async"].plugin == "rlf"
    assert reg.plugins["rlf"].collectors == ["sync", "async"]
    assert "rlf_register_collectors" in reg.plugins["rlf"].hooks
    assert reg.collectors["counting"].plugin == "third-party"
    assert reg.plugins["third-party"].collectors == ["counting"]


def test_auto_is_the_environments_preference(reg):
    gym = reg.environment("gym:CartPole-v1")
    assert reg.collector("auto", gym).name == "sync"
    assert reg.collector("async", gym).name == "async"
    preferring = type(gym)(gym.name, gym.build_env, gym.config, gym.plugin, prefer_subprocess=True)
    assert reg.collector("auto", preferring).name == "async"


def test_a_third_party_collector_steps_the_training_envs_with_its_settings(reg, tmp_path):
    report = tmp_path / "report.json"
    algo = make("tabular-q", "line", registry=reg, overrides=[
        "steps=120", "num_envs=3", "vector=counting", f"collector.report='{report}'", "collector.seed_offset=5",
        "progress=false", f"run_dir='{tmp_path / 'run'}'"])
    algo.train()
    seen = json.loads(report.read_text())
    assert seen["num_envs"] == 3 and seen["env"] == "line"
    assert seen["steps"] * 3 == algo.counters["env_steps"] == 120
    assert seen["resets"] == [0 + 5]  # run.seed 0 plus the collector's own setting
    saved = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert saved["run"]["vector"] == "counting" and saved["collector"]["seed_offset"] == 5


def test_resume_keeps_the_collector_and_its_settings_or_drops_them_with_a_new_one(reg, tmp_path):
    report = tmp_path / "report.json"
    run_dir = tmp_path / "run"
    make("tabular-q", "line", registry=reg, overrides=[
        "steps=40", "vector=counting", f"collector.report='{report}'", "collector.seed_offset=2",
        "progress=false", f"run_dir='{run_dir}'"]).train()
    again = rlf.load(run_dir, registry=reg)
    assert again.resolved.collector_spec.name == "counting" and again.resolved.collector.seed_offset == 2
    switched = rlf.load(run_dir, registry=reg, overrides=["vector=sync"])
    assert switched.resolved.collector_spec.name == "sync"
    switched.train(steps=80)
    assert switched.counters["env_steps"] == 80


def test_unknown_collector_is_one_line_listing_the_installed_ones(reg):
    with pytest.raises(UnknownNameError) as caught:
        make("tabular-q", "line", registry=reg, overrides=["vector=countng"])
    message = str(caught.value)
    assert "\n" not in message and "run.vector" in message and "'countng'" in message
    assert "did you mean 'counting'" in message and all(name in message for name in ("async", "counting", "sync"))


def test_collector_settings_are_validated_against_the_selected_collector(reg):
    with pytest.raises(ConfigError, match=r"unknown key 'collector.seed_ofset'; did you mean collector.seed_offset"):
        make("tabular-q", "line", registry=reg, overrides=["vector=counting", "collector.seed_ofset=1"])
    with pytest.raises(ConfigError, match=r"collector.seed_offset: .*greater than or equal to 0"):
        make("tabular-q", "line", registry=reg, overrides=["vector=counting", "collector.seed_offset=-1"])
    # sync has no settings; counting reads this one, so the line says so
    with pytest.raises(ConfigError, match="collector.report is a setting of the 'counting' collector"):
        make("tabular-q", "line", registry=reg, overrides=["vector=sync", "collector.report='x'"])


def test_a_collector_that_breaks_the_contract_is_named_at_setup(tmp_path):
    class NotAVector:
        num_envs = 1

        def close(self):
            self.closed = True

    built = []

    class Broken:
        RLF_API_VERSION = rlf.API_VERSION

        @hookimpl
        def rlf_register_collectors(self, register):
            register("half", build_collector=lambda *args: built.append(NotAVector()) or built[-1])

    reg = load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("broken", Broken())])
    algo = make("tabular-q", "line", registry=reg,
                overrides=["steps=10", "vector=half", "progress=false", f"run_dir='{tmp_path}'"])
    with pytest.raises(PluginError, match=r"collector 'half' returned NotAVector, which lacks spec, parts, reset, step"):
        algo.train()
    assert built[0].closed


@pytest.mark.parametrize("config", [object, dict])
def test_a_collector_config_must_be_a_pydantic_model(config):
    class Bad:
        RLF_API_VERSION = rlf.API_VERSION

        @hookimpl
        def rlf_register_collectors(self, register):
            register("bad", build_collector="x:y", config=config)

    reg = load_registry(extra_plugins=[("bad", Bad())])
    assert "config must be a pydantic model class" in reg.plugins["bad"].error
    assert "bad" not in reg.collectors


def test_cli_lists_collectors_and_trains_with_a_third_party_one(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_fake_plugin(site, "test", "support:test_plugin")
    install_fake_plugin(site, "third-party", "third_party_plugin:plugin")
    listing = run_rlf("list", site=site, check=True).stdout
    collectors = listing[listing.index("collectors"):]
    assert "async" in collectors and "sync" in collectors and "counting" in collectors and "third-party" in collectors
    rows = {row["name"]: row for row in json.loads(run_rlf("plugins", "--json", site=site, check=True).stdout)}
    assert rows["third-party"]["collectors"] == ["counting"] and rows["rlf"]["collectors"] == ["sync", "async"]
    report = tmp_path / "report.json"
    trained = run_rlf("train", "linear-pg", "--env", "line", "--steps", "64", "--no-progress", "--set", "num_envs=2",
                      "--set", "vector=counting", "--set", f"collector.report='{report}'",
                      "--run-dir", str(tmp_path / "run"), site=site, check=True)
    assert "done:" in trained.stdout
    with open(tmp_path / "run" / "metrics.csv") as handle:
        last = list(csv.DictReader(handle))[-1]
    assert json.loads(report.read_text())["steps"] * 2 == int(float(last["env_step"])) == 64
    bad = run_rlf("train", "linear-pg", "--env", "line", "--set", "vector=nope", site=site)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "counting" in bad.stderr
    config = run_rlf("config", "linear-pg", "--env", "line", site=site, check=True).stdout
    assert "[collector]" in config


def test_a_setting_of_a_collector_not_selected_names_that_collector(reg, tmp_path):
    from rlf.resolution import resolve

    with pytest.raises(ConfigError) as caught:
        resolve("tabular-q", "line", registry=reg, overrides=["collector.seed_offset=5", "vector=sync"])
    assert str(caught.value) == ("collector.seed_offset is a setting of the 'counting' collector, but this run's "
                                 "collector is 'sync' (run.vector); set vector=counting to use it, or drop the setting")
    # a key no collector has keeps the unknown-key line
    with pytest.raises(ConfigError, match=r"unknown key 'collector.nothing'"):
        resolve("tabular-q", "line", registry=reg, overrides=["collector.nothing=5"])


def test_an_unquoted_toml_list_gets_the_quoted_spelling(reg):
    from rlf.resolution import resolve

    with pytest.raises(ConfigError) as caught:
        resolve("tabular-q", "line", registry=reg, overrides=["loggers=[csv, progress]"])
    assert "TOML strings need quotes, inside a list too: --set 'loggers=[\"csv\", \"progress\"]'" in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1


@pytest.mark.parametrize("setting, expected", [([], 0), (["collector.worker_nice=7"], 7), (["collector.worker_nice=2"], 2)])
def test_async_workers_run_at_the_configured_niceness_above_the_trainer(reg, setting, expected):
    import os

    from rlf.envs.base import EnvFactory
    from rlf.envs.collectors import Collector, build_async_collector
    from rlf.resolution import resolve

    resolved = resolve("tabular-q", "gym:CartPole-v1", registry=reg, overrides=["vector=async", *setting])
    assert resolved.collector.worker_nice == expected
    collector = Collector("async", build_async_collector, resolved.collector)
    envs = collector("gym:CartPole-v1", EnvFactory(resolved.environment.build_env, resolved.env), 2)
    try:
        own = os.getpriority(os.PRIO_PROCESS, 0)
        workers = [p.pid for group in envs.groups for p in group.processes]
        assert workers and {os.getpriority(os.PRIO_PROCESS, pid) for pid in workers} == {min(own + expected, 19)}
    finally:
        envs.close()


def test_worker_niceness_is_bounded(reg):
    from rlf.resolution import resolve

    with pytest.raises(ConfigError, match=r"collector.worker_nice: .*less than or equal to 19"):
        resolve("tabular-q", "gym:CartPole-v1", registry=reg, overrides=["vector=async", "collector.worker_nice=20"])

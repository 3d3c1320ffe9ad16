"""Per-env presets: an algorithm plugin's tuned settings for an environment (`register(..., presets=...)`),
which `rlf train ALGO --env ENV` layers under the user's settings, says it did, and leaves out with
`--no-preset` or a `--config` file. A broken preset is the plugin's fault: one line that says how to train
without it."""

import sys
import textwrap

import pytest
from core.test_cli_errors import assert_one_line_error
from core.test_plugins import run_rlf
from support import TestPlugin, install_fake_plugin

from rlf.errors import PluginError
from rlf.plugins import load_registry
from rlf.resolution import resolve

PACKAGE = "rlf_preset_fixture"

PLUGIN = textwrap.dedent('''
    from rlf import StrategyFamily, hookimpl
    from support import TabularQConfig

    class Plugin:
        RLF_API_VERSION = 1
        PRESETS = {"line": "rlf_preset_fixture:presets/line.toml"}

        @hookimpl
        def rlf_register_algorithms(self, register):
            register("tuned-q", build_agent="support:build_tabular_agent",
                     build_learner="support:build_tabular_learner", family=StrategyFamily.OFF_POLICY,
                     config=TabularQConfig, run_defaults={"num_envs": 3, "log_interval": 7},
                     presets=self.PRESETS)

    plugin = Plugin()
''')

PRESET = 'steps = 120\nnum_envs = 2\n[algo]\nalpha = 0.25\ngamma = 0.8\n[env]\nlength = 7\n'


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A package holding the plugin and its preset file, importable here and by `rlf` subprocesses."""
    site = tmp_path / "site"
    (site / PACKAGE / "presets").mkdir(parents=True)
    (site / PACKAGE / "__init__.py").write_text(PLUGIN)
    (site / PACKAGE / "presets" / "line.toml").write_text(PRESET)
    install_fake_plugin(site, "test", "support:test_plugin")
    install_fake_plugin(site, "tuned", f"{PACKAGE}:plugin")
    monkeypatch.syspath_prepend(str(site))
    # each test has its own copy: the package another test imported would be found at its old place
    monkeypatch.delitem(sys.modules, PACKAGE, raising=False)
    return site


@pytest.fixture
def registry(site):
    return load_registry()  # finds both fake distributions on sys.path, as it finds installed plugins


def test_the_preset_sits_between_the_run_defaults_and_the_users_settings(registry, tmp_path):
    resolved = resolve("tuned-q", "line", overrides=["algo.alpha=0.5"], registry=registry, preset=True)
    assert resolved.preset == f"{PACKAGE}/presets/line.toml"
    assert resolved.run.steps == 120 and resolved.run.num_envs == 2  # the preset beats the run defaults
    assert resolved.run.log_interval == 7                             # run defaults it does not set stay
    assert resolved.algo.alpha == 0.5 and resolved.algo.gamma == 0.8  # --set beats the preset
    assert resolved.env.length == 7


def test_without_it_the_plain_defaults(registry):
    plain = resolve("tuned-q", "line", registry=registry)
    assert plain.preset is None
    assert (plain.run.num_envs, plain.algo.alpha, plain.algo.gamma, plain.env.length) == (3, 0.5, 0.95, 5)


def test_a_config_file_is_the_users_whole_recipe_and_replaces_the_preset(registry, tmp_path):
    file = tmp_path / "mine.toml"
    file.write_text("[algo]\ngamma = 0.6\n")
    resolved = resolve("tuned-q", "line", config_file=file, registry=registry, preset=True)
    assert resolved.preset is None
    assert (resolved.algo.alpha, resolved.algo.gamma, resolved.run.num_envs) == (0.5, 0.6, 3)


def test_an_env_without_a_preset_gets_the_defaults(registry):
    other = resolve("tuned-q", "gym:CartPole-v1", registry=registry, preset=True)
    assert other.preset is None and (other.run.num_envs, other.algo.gamma) == (3, 0.95)
    assert resolve("tabular-q", "line", registry=registry, preset=True).preset is None


def test_a_missing_preset_file_is_one_line_naming_the_way_around(registry, site):
    (site / PACKAGE / "presets" / "line.toml").unlink()
    with pytest.raises(PluginError) as err:
        resolve("tuned-q", "line", registry=registry, preset=True)
    message = str(err.value)
    assert f"{PACKAGE}/presets/line.toml" in message and "--no-preset" in message and "\n" not in message


@pytest.mark.parametrize("content, named", [
    ('[run]\nenv = "gym:CartPole-v1"\n', "tuned-q on gym:CartPole-v1"),
    ('[run]\nalgorithm = "dqn"\n', "dqn on line"),
    ("[algo\n", "not a valid config"),
    ("[optimizer]\nlr = 1\n", "not a valid config"),
])
def test_a_preset_written_for_something_else_is_refused(registry, site, content, named):
    (site / PACKAGE / "presets" / "line.toml").write_text(content)
    with pytest.raises(PluginError) as err:
        resolve("tuned-q", "line", registry=registry, preset=True)
    assert named in str(err.value) and "--no-preset" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("presets", [
    {"line": "presets/line.toml"}, {"line": 3}, ["line"], {"": f"{PACKAGE}:presets/line.toml"},
    {"line": f"{PACKAGE}:"},
])
def test_a_malformed_presets_declaration_fails_the_plugin_at_load(presets):
    from support import TabularQConfig

    from rlf import StrategyFamily, hookimpl

    class Bad:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_algorithms(self, register):
            register("bad-q", build_agent="support:build_tabular_agent",
                     build_learner="support:build_tabular_learner", family=StrategyFamily.OFF_POLICY,
                     config=TabularQConfig, presets=presets)

    registry = load_registry(extra_plugins=[("t", TestPlugin()), ("bad", Bad())])
    assert "bad-q" not in registry.algorithms
    assert "presets must map environment names" in registry.plugins["bad"].error


def test_train_prints_the_preset_and_no_preset_leaves_it_out(site, tmp_path):
    ran = run_rlf("train", "tuned-q", "--env", "line", "--run-dir", str(tmp_path / "a"), "--no-progress",
                  "--steps", "40", site=site, check=True)
    said = [line for line in ran.stderr.splitlines() if line.startswith("preset:")]
    assert said == [f"preset: {PACKAGE}/presets/line.toml (tuned-q's tuned settings for line, under --set; "
                    "--no-preset for the plain defaults)"]
    config = (tmp_path / "a" / "run.json").read_text()
    assert '"gamma": 0.8' in config and '"length": 7' in config
    plain = run_rlf("train", "tuned-q", "--env", "line", "--run-dir", str(tmp_path / "b"), "--no-progress",
                    "--steps", "40", "--no-preset", site=site, check=True)
    assert "preset:" not in plain.stderr
    assert '"gamma": 0.95' in (tmp_path / "b" / "run.json").read_text()


def test_config_shows_the_preset_values_and_list_names_the_presets(site):
    shown = run_rlf("config", "tuned-q", "--env", "line", site=site, check=True)
    assert "preset: rlf_preset_fixture/presets/line.toml" in shown.stderr
    assert any(line.startswith("gamma = 0.8  #") for line in shown.stdout.splitlines())
    listed = run_rlf("list", site=site, check=True).stdout
    assert any(line.split()[0] == "tuned-q" and line.endswith("presets: line") for line in listed.splitlines())


def test_a_broken_preset_stops_train_with_one_line(site, tmp_path):
    (site / PACKAGE / "presets" / "line.toml").write_text("[algo]\nalpha = 7\n")
    result = run_rlf("train", "tuned-q", "--env", "line", "--run-dir", str(tmp_path / "c"), site=site)
    assert_one_line_error(result, "alpha")
    assert not (tmp_path / "c").exists()

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import install_fake_plugin

from rlf import PluginError, StrategyFamily, UnknownNameError, hookimpl
from rlf.plugins import load_registry

TESTS = Path(__file__).resolve().parents[1]


def run_rlf(*args, site=None, env=None, check=False):
    paths = [str(TESTS)] + ([str(site)] if site else [])
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **(env or {})}
    full_env.pop("RLF_STRICT_PLUGINS", None) if "RLF_STRICT_PLUGINS" not in (env or {}) else None
    result = subprocess.run([sys.executable, "-m", "rlf.cli.commands", *args], capture_output=True, text=True,
                            env=full_env, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_fake_plugin(site, "test", "support:test_plugin")
    return site


def test_a_plugin_that_raises_on_import_is_reported_and_the_rest_work(site, tmp_path):
    install_fake_plugin(site, "broken", "rlf_broken_plugin", "raise RuntimeError('boom at import')\n",
                        module="rlf_broken_plugin")
    listing = run_rlf("plugins", "--json", site=site, check=True)
    rows = {row["name"]: row for row in json.loads(listing.stdout)}
    assert "RuntimeError: boom at import" in rows["broken"]["error"]
    assert rows["test"]["error"] is None and "linear-pg" in rows["test"]["algorithms"]
    trained = run_rlf("train", "tabular-q", "--env", "line", "--steps", "200", "--no-progress",
                      "--run-dir", str(tmp_path / "run"), site=site)
    assert trained.returncode == 0, trained.stderr
    assert (tmp_path / "run" / "checkpoint.rlf").is_file()
    human = run_rlf("plugins", site=site, check=True).stdout
    assert "broken" in human and "ERROR RuntimeError: boom at import" in human


def test_strict_mode_turns_a_load_error_into_a_failure(site):
    install_fake_plugin(site, "broken", "rlf_broken_plugin", "raise ImportError('no such dep')\n",
                        module="rlf_broken_plugin")
    for result in (run_rlf("--strict", "list", site=site),
                   run_rlf("list", site=site, env={"RLF_STRICT_PLUGINS": "1"})):
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and "broken" in result.stderr and "Traceback" not in result.stderr


def test_load_only_named_plugins_or_none(site):
    only = run_rlf("plugins", "--json", site=site, env={"RLF_LOAD_PLUGINS": "test"}, check=True)
    names = {row["name"] for row in json.loads(only.stdout)}
    assert names == {"rlf", "test"}
    none = run_rlf("plugins", "--json", site=site, env={"RLF_LOAD_PLUGINS": ""}, check=True)
    assert {row["name"] for row in json.loads(none.stdout)} == {"rlf"}


def test_a_plugin_for_another_api_version_is_a_clear_error():
    class Future:
        RLF_API_VERSION = 2

        @hookimpl
        def rlf_register_algorithms(self, register):
            raise AssertionError("must not be called")

    registry = load_registry(extra_plugins=[("future", Future())])
    assert "built for rlf API 2" in registry.plugins["future"].error
    with pytest.raises(PluginError, match="built for rlf API 2"):
        load_registry(strict=True, extra_plugins=[("future", Future())])


def test_a_plugin_without_an_api_version_is_rejected():
    class Anonymous:
        @hookimpl
        def rlf_register_environments(self, register):
            pass

    assert "RLF_API_VERSION" in load_registry(extra_plugins=[("anon", Anonymous())]).plugins["anon"].error


def test_unknown_hooks_are_caught_by_check_pending():
    class Newer:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_optimizers(self, register):
            pass

    error = load_registry(extra_plugins=[("newer", Newer())]).plugins["newer"].error
    assert "hooks this core does not know" in error and "rlf_register_optimizers" in error


def test_a_registration_error_is_isolated_to_its_plugin():
    from support import TestPlugin

    class Clashing:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_algorithms(self, register):
            register("linear-pg", build_agent=None, build_learner=None, family=StrategyFamily.ON_POLICY,
                     config=dict)

    registry = load_registry(extra_plugins=[("test", TestPlugin()), ("clash", Clashing())])
    assert "config must subclass" in registry.plugins["clash"].error
    assert registry.algorithm("linear-pg").plugin == "test"


def test_unknown_names_list_what_is_installed_and_which_plugin_would_provide_it(registry):
    with pytest.raises(UnknownNameError) as err:
        registry.algorithm("no-such-algo")
    message = str(err.value)
    assert "installed:" in message and "linear-pg" in message and "pip install rlf-plugin-no-such-algo" in message
    with pytest.raises(UnknownNameError, match="did you mean 'line'"):
        registry.environment("lines")


def test_plugin_listing_and_config_commands(site):
    listing = run_rlf("list", site=site, check=True).stdout
    assert "linear-pg" in listing and "linear-pg      on-policy" in listing and "gym:<id>" in listing and "line" in listing
    config = run_rlf("config", "tabular-q", "--env", "line", site=site, check=True).stdout
    assert "[algo]" in config and "alpha = 0.5" in config and "Learning rate." in config
    assert "exploration.decay = 0.995" in config and "[env]" in config and "length = 5" in config
    env_only = run_rlf("config", "--env", "gym:Acrobot-v1", site=site, check=True).stdout
    assert env_only.startswith("[env]") and 'id = "Acrobot-v1"' in env_only and "[algo]" not in env_only

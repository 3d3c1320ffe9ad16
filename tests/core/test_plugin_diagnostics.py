"""The plugin that is not there: an installed distribution rlf cannot see (its entry points in a group
other than ``rlf``, or an ``rlf-plugin-*`` with none) is named by `rlf plugins`, `rlf plugins --check` and
the unknown-name error, which then does not advise installing what is installed; a misspelt hook gets
"did you mean"; `--check` warns about a plugin that imports a heavy package as it loads."""

from __future__ import annotations

import json

import pytest
from core.test_cli_errors import assert_one_line_error
from core.test_plugins import run_rlf
from support import install_fake_plugin

from rlf import hookimpl
from rlf.plugins import load_registry
from rlf.plugins.discovery import near_miss_group

LIGHT = '''
from rlf import EnvConfig, hookimpl

RLF_API_VERSION = 1


@hookimpl
def rlf_register_environments(register):
    register("{env}", build_env="support:make_line", config=EnvConfig)
'''

HEAVY = LIGHT.replace("from rlf import", "import jax\nfrom rlf import")
ONLY_TEST = {"RLF_LOAD_PLUGINS": "test"}  # the environment's own plugins stay out: quicker, and the same anywhere


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_fake_plugin(site, "test", "support:test_plugin")
    return site


@pytest.mark.parametrize("group", ["rlf.plugins", "rlf_plugins", "rlf-plugins", "rlf.plugin", "RLF", "rfl",
                                   "rlf.algorithms"])
def test_groups_meant_to_be_rlf_are_near_misses(group):
    assert near_miss_group(group)


@pytest.mark.parametrize("group", ["rlf", "console_scripts", "pytest11", "rl_games", "mlflow.app", "gui_scripts",
                                   "flake8.extension", "tensorboard_plugins"])
def test_other_groups_are_not(group):
    assert not near_miss_group(group)


def test_a_plugin_in_a_near_miss_group_is_named_everywhere_and_not_sent_to_pip(site):
    install_fake_plugin(site, "lost", "rlf_lost_plugin", LIGHT.format(env="lost-env"), module="rlf_lost_plugin",
                        group="rlf.plugins", distribution="rlf-plugin-lost")
    why = "rlf-plugin-lost 0.0.1 is installed but declares its entry points in group 'rlf.plugins', not 'rlf'"
    listing = run_rlf("plugins", site=site, env=ONLY_TEST, check=True).stdout
    assert "rlf-plugin-lost" in listing and "not loaded: declares its entry points in group 'rlf.plugins'" in listing
    assert "[project.entry-points.rlf]" in listing
    listed = run_rlf("plugins", "--json", site=site, env=ONLY_TEST, check=True).stdout
    rows = {row["name"]: row for row in json.loads(listed)}
    assert "group 'rlf.plugins'" in rows["rlf-plugin-lost"]["error"] and rows["test"]["error"] is None
    check = run_rlf("plugins", "--check", site=site, env=ONLY_TEST)
    assert check.returncode == 2 and "rlf-plugin-lost" in check.stdout and "group 'rlf.plugins'" in check.stdout
    # the algorithm's name and the environment's: the provider is installed, so no `pip install` advice
    assert_one_line_error(run_rlf("train", "lost", site=site, env=ONLY_TEST), "unknown algorithm 'lost'", why)
    assert "pip install" not in run_rlf("train", "lost", site=site, env=ONLY_TEST).stderr
    assert_one_line_error(run_rlf("train", "tabular-q", "--env", "lost", site=site, env=ONLY_TEST),
                          "unknown environment", why)


def test_an_rlf_plugin_distribution_without_entry_points_and_an_unrelated_name(site):
    install_fake_plugin(site, "bare", "-", group=None, distribution="rlf-plugin-bare")
    install_fake_plugin(site, "tools", "acme_tools:plugin", group="rlf_plugins", distribution="acme-rl-tools")
    install_fake_plugin(site, "cli", "acme_cli:main", group="console_scripts", distribution="acme-cli")
    listing = run_rlf("plugins", site=site, env=ONLY_TEST, check=True).stdout
    assert "rlf-plugin-bare" in listing and "declares no entry point in group 'rlf'" in listing
    assert "acme-rl-tools" in listing and "group 'rlf_plugins', not 'rlf'" in listing
    assert "acme-cli" not in listing
    # a name neither provides: the usual advice, and the unseen ones named after it
    error = run_rlf("train", "nothing-here", site=site, env=ONLY_TEST)
    assert_one_line_error(error, "`pip install rlf-plugin-nothing-here`; also installed but not seen by rlf: "
                          "acme-rl-tools 0.0.1 (declares its entry points in group 'rlf_plugins', not 'rlf'), "
                          "rlf-plugin-bare 0.0.1 (declares no entry point in group 'rlf') (see `rlf plugins`)")


def test_nothing_unseen_is_nothing_said(site):
    listing = run_rlf("plugins", site=site, env=ONLY_TEST, check=True).stdout
    assert "not loaded" not in listing
    error = run_rlf("train", "nothing-here", site=site, env=ONLY_TEST).stderr
    assert "is installed but" not in error and "pip install rlf-plugin-nothing-here" in error


def test_an_installed_provider_that_registers_something_else_is_not_sent_to_pip(site):
    install_fake_plugin(site, "other", "rlf_other_plugin", LIGHT.format(env="other-env"),
                        module="rlf_other_plugin", distribution="rlf-plugin-other")
    assert_one_line_error(run_rlf("train", "other", site=site, env={"RLF_LOAD_PLUGINS": "test,other"}),
                          "rlf-plugin-other is installed but registers no algorithm 'other'")


def test_a_misspelt_hook_gets_did_you_mean_and_a_new_one_the_upgrade_advice():
    class Typo:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_enviroments(self, register):
            pass

    class Short:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_algos(self, register):
            pass

    class Newer:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_optimizers(self, register):
            pass

    registry = load_registry(extra_plugins=[("typo", Typo()), ("short", Short()), ("newer", Newer())])
    typo = registry.plugins["typo"].error
    assert "hook 'rlf_register_enviroments': did you mean 'rlf_register_environments'?" in typo
    assert "upgrade rlf" not in typo
    assert "did you mean 'rlf_register_algorithms'?" in registry.plugins["short"].error
    newer = registry.plugins["newer"].error
    assert "upgrade rlf" in newer and "did you mean" not in newer


def test_check_warns_about_a_plugin_that_imports_a_heavy_package_as_it_loads(site):
    install_fake_plugin(site, "light", "rlf_light_plugin", LIGHT.format(env="light-env"), module="rlf_light_plugin")
    for name in ("heavy", "heavy-too"):  # the second to load finds jax imported: measured in a process of its own
        module = f"rlf_{name.replace('-', '_')}_plugin"
        install_fake_plugin(site, name, module, HEAVY.format(env=f"{name}-env"), module=module)
    (site / "jax").mkdir()  # a stand-in, found first on the path: the measurement is what counts
    (site / "jax" / "__init__.py").write_text("")
    check = run_rlf("plugins", "--check", site=site, env={"RLF_LOAD_PLUGINS": "test,light,heavy,heavy-too"})
    assert check.returncode == 0, check.stdout + check.stderr  # a warning, not a problem
    warnings = [line for line in check.stderr.splitlines() if line.startswith("rlf: warning:")]
    assert len(warnings) == 2, check.stderr
    assert "plugin 'heavy' imports jax as it loads" in warnings[0] and "builders" in warnings[0]
    assert "plugin 'heavy-too' imports jax as it loads" in warnings[1]

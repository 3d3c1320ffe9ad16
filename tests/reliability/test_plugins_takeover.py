"""Plugins cannot take over the CLI: exits and crashes at import or in a hook are isolated, a name two
distributions claim goes to neither, broken builder strings are found before anything is written,
and wrong actions from a plugin's agent name the plugin and the expected shape."""

from __future__ import annotations

import json

import numpy as np
import pytest
from core.test_plugins import run_rlf
from faults import error_lines
from gymnasium import spaces
from support import install_fake_plugin

from rlf import PluginError
from rlf.envs import check_actions
from rlf.interfaces import SINGLE_AGENT, EnvSpec

HOOKS = '''
from rlf import StrategyFamily, hookimpl
from support import TabularQConfig
RLF_API_VERSION = 1

@hookimpl
def rlf_register_algorithms(register):
    register({name!r}, build_agent={agent!r}, build_learner="support:build_tabular_learner",
             family=StrategyFamily.OFF_POLICY, config=TabularQConfig)
'''


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install_fake_plugin(site, "test", "support:test_plugin")
    return site


def _train(site, run, *extra, algorithm="tabular-q"):
    return run_rlf("train", algorithm, "--env", "line", "--steps", "40", "--no-progress", "--run-dir", str(run),
                   *extra, site=site)


@pytest.mark.parametrize("statement", ["import sys; sys.exit(0)", "raise SystemExit(3)",
                                       "import os; raise GeneratorExit()"])
def test_an_exit_at_import_is_a_load_error_not_the_cli_exit(site, tmp_path, statement):
    install_fake_plugin(site, "rogue", "rlf_rogue", statement + "\n", module="rlf_rogue")
    listing = run_rlf("plugins", "--json", site=site)
    assert listing.returncode == 0, listing.stderr
    rows = {row["name"]: row for row in json.loads(listing.stdout)}
    assert rows["rogue"]["error"].split(":")[0] in ("SystemExit", "GeneratorExit")
    trained = _train(site, tmp_path / "run")
    assert trained.returncode == 0 and "done:" in trained.stdout, trained.stderr
    strict = run_rlf("--strict", "list", site=site)
    assert strict.returncode == 2 and len(error_lines(strict.stderr)) == 1 and "rogue" in strict.stderr


def test_an_exit_inside_a_registration_hook_is_isolated(site, tmp_path):
    source = ("from rlf import hookimpl\nRLF_API_VERSION = 1\n"
              "@hookimpl\ndef rlf_register_algorithms(register):\n    raise SystemExit(0)\n")
    install_fake_plugin(site, "rogue", "rlf_rogue", source, module="rlf_rogue")
    listing = run_rlf("plugins", site=site)
    assert listing.returncode == 0 and "rogue" in listing.stdout and "SystemExit" in listing.stdout
    assert _train(site, tmp_path / "run").returncode == 0


def test_a_name_two_distributions_claim_goes_to_neither(site, tmp_path):
    install_fake_plugin(site, "impostor", "rlf_impostor",
                        HOOKS.format(name="tabular-q", agent="support:build_tabular_agent"), module="rlf_impostor")
    result = _train(site, tmp_path / "run")
    [line] = error_lines(result.stderr)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "'tabular-q' is registered by 2 plugins" in line
    assert "rlf-fake-test" in line and "rlf-fake-impostor" in line, line
    assert not (tmp_path / "run").exists()
    # the genuine plugin's other names still work
    assert _train(site, tmp_path / "run2", algorithm="linear-pg").returncode == 0
    listing = run_rlf("plugins", site=site).stdout
    assert listing.count("is registered by 2 plugins") == 2


def test_a_builder_typo_is_found_by_check_and_stops_train_before_the_run_dir(site, tmp_path):
    install_fake_plugin(site, "typo", "rlf_typo",
                        HOOKS.format(name="typo-q", agent="suport:build_tabular_agent"), module="rlf_typo")
    listing = run_rlf("list", site=site)
    assert listing.returncode == 0 and "typo-q" in listing.stdout  # discovery stays lazy
    check = run_rlf("plugins", "--check", site=site)
    assert check.returncode == 2, check.stdout
    assert "suport:build_tabular_agent" in check.stdout and "ModuleNotFoundError" in check.stdout
    assert "build_agent" in check.stdout and "algorithm typo-q" in check.stdout
    assert len(error_lines(check.stderr)) == 1
    result = _train(site, tmp_path / "run", algorithm="typo-q")
    [line] = error_lines(result.stderr)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "builder 'suport:build_tabular_agent' cannot be imported" in line
    assert not (tmp_path / "run").exists()


def test_check_passes_when_every_builder_imports(site):
    check = run_rlf("plugins", "--check", site=site, env={"RLF_LOAD_PLUGINS": "test"})
    assert check.returncode == 0, check.stdout + check.stderr
    assert "builders import" in check.stdout


def test_an_agent_with_wrong_actions_is_named_with_the_expected_shape(site, tmp_path):
    source = HOOKS.format(name="wrong-shape", agent="rlf_wrong:build") + '''
import numpy as np
from support import build_tabular_agent
from rlf import Acting

def build(context):
    agent = build_tabular_agent(context)
    act = agent.act
    def wrong(obs, *, explore=True):
        acting = act(obs, explore=explore)
        return Acting({a: np.stack([v, v], axis=1) for a, v in acting.actions.items()}, acting.extras)
    agent.act = wrong
    return agent
'''
    install_fake_plugin(site, "wrong", "rlf_wrong", source, module="rlf_wrong")
    result = _train(site, tmp_path / "run", algorithm="wrong-shape")
    [line] = error_lines(result.stderr)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "algorithm 'wrong-shape' (plugin wrong)" in line and "shape (1, 2)" in line
    assert "expected integers of shape (1,) in [0, 2)" in line, line


SPEC = EnvSpec("gym:Test", (SINGLE_AGENT,), {SINGLE_AGENT: spaces.Box(-1, 1, (3,))},
               {SINGLE_AGENT: spaces.Discrete(3)}, False, 2, {})


@pytest.mark.parametrize(("actions", "problem"), [
    ({SINGLE_AGENT: np.array([0, 1, 2])}, "shape (3,)"),
    ({SINGLE_AGENT: np.array([0.0, 1.0])}, "dtype float64"),
    ({SINGLE_AGENT: np.array([0, 3])}, "values [0, 3]"),
    ({SINGLE_AGENT: np.array([-1, 0])}, "values [-1, 0]"),
    ({"other": np.array([0, 1])}, "actions for ['other']"),
    ([0, 1], "actions for list"),
])
def test_check_actions_names_what_is_wrong(actions, problem):
    with pytest.raises(PluginError) as caught:
        check_actions(SPEC, actions, 2, "algorithm 'x' (plugin p)")
    assert problem in str(caught.value) and "algorithm 'x' (plugin p)" in str(caught.value)


def test_check_actions_accepts_right_actions_and_continuous_ones_left_to_the_env():
    check_actions(SPEC, {SINGLE_AGENT: np.array([0, 2], dtype=np.int32)}, 2, "x")
    box = EnvSpec("gym:Box", (SINGLE_AGENT,), SPEC.observation_spaces, {SINGLE_AGENT: spaces.Box(-2, 2, (1,))},
                  False, 2, {})
    check_actions(box, {SINGLE_AGENT: np.array([[3.0], [-0.5]], dtype=np.float32)}, 2, "x")
    with pytest.raises(PluginError, match="non-finite"):
        check_actions(box, {SINGLE_AGENT: np.array([[np.nan], [0.0]], dtype=np.float32)}, 2, "x")


def test_every_installed_plugin_passes_the_check():
    """The real plugins' builder strings all import (what `rlf plugins --check` is for)."""
    check = run_rlf("--strict", "plugins", "--check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "builders import" in check.stdout


def test_a_plugin_cannot_claim_a_core_name():
    """The core's own names stay the core's: the claiming plugin gets the error, gym:<id> keeps working."""
    from support import LineConfig

    from rlf import hookimpl
    from rlf.plugins import load_registry

    class Squatter:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_environments(self, register):
            register("gym:", build_env="support:make_line", config=LineConfig)

    reg = load_registry(extra_plugins=[("squatter", Squatter())])
    assert "already registered by plugin 'rlf'" in reg.plugins["squatter"].error
    assert reg.environment("gym:CartPole-v1").plugin == "rlf"

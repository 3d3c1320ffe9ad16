"""An on-policy agent whose act() breaks the extras contract is told so in one line naming the plugin,
the algorithm, act() and the field, through the CLI and the Python API alike."""

import numpy as np
import pytest
from core.test_cli_errors import assert_one_line_error
from support import install_fake_plugin
from test_plugins import run_rlf

from rlf import Acting, PluginError
from rlf.api import make
from rlf.plugins import load_registry

# the plugin's source: `rlf train` in a subprocess loads it from a fake distribution
BROKEN_PLUGIN = """
import rlf
from rlf import Acting, StrategyFamily, hookimpl
from support import LinearPGConfig, LinearPolicy, build_linear_learner


class NoValuePolicy(LinearPolicy):
    def act(self, obs, *, explore=True):
        acting = super().act(obs, explore=explore)
        return Acting(acting.actions, {a: {"log_prob": e["log_prob"]} for a, e in acting.extras.items()})


class ColumnValuePolicy(LinearPolicy):
    def act(self, obs, *, explore=True):
        acting = super().act(obs, explore=explore)
        return Acting(acting.actions, {a: {**e, "value": e["value"][:, None]} for a, e in acting.extras.items()})


class BrokenPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @hookimpl
    def rlf_register_algorithms(self, register):
        for name, policy in (("no-value-pg", NoValuePolicy), ("column-value-pg", ColumnValuePolicy)):
            register(name, build_agent=lambda context, policy=policy: policy(context.env_spec, context.seed),
                     build_learner=build_linear_learner, family=StrategyFamily.ON_POLICY, config=LinearPGConfig,
                     default_env="gym:CartPole-v1")


broken_plugin = BrokenPlugin()
"""
namespace: dict = {}
exec(compile(BROKEN_PLUGIN, "rlf_broken_on_policy", "exec"), namespace)
BrokenPlugin = namespace["BrokenPlugin"]

MISSING = ('plugin \'broken\' (algorithm \'no-value-pg\'): act() returned no extras["value"] for agent \'agent\'; '
           "an on-policy agent returns the value estimate of each observation (shape (N,)) beside its actions "
           "(docs/plugin-guide/contracts.md)")
COLUMN = ('plugin \'broken\' (algorithm \'column-value-pg\'): act() returned extras["value"] of shape (8, 1) '
          "for 8 observations; expected (8,)")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    install_fake_plugin(site, "broken", "rlf_broken_on_policy:broken_plugin", BROKEN_PLUGIN,
                        module="rlf_broken_on_policy")
    return site


@pytest.mark.parametrize(("algorithm", "message"), [("no-value-pg", MISSING), ("column-value-pg", COLUMN)])
def test_rlf_train_names_the_plugin_and_the_field_in_one_line(site, tmp_path, algorithm, message):
    result = run_rlf("train", algorithm, "--env", "gym:CartPole-v1", "--steps", "64", "--set", "num_envs=8",
                     "--set", "algo.rollout_steps=4", "--no-progress", "--run-dir", str(tmp_path / "run"), site=site)
    assert_one_line_error(result, message)
    assert result.stderr.strip().splitlines()[-1] == f"rlf: error: {message}"


@pytest.mark.parametrize(("algorithm", "message"), [("no-value-pg", MISSING), ("column-value-pg", COLUMN)])
def test_the_python_api_raises_the_same_plugin_error(tmp_path, algorithm, message):
    registry = load_registry(extra_plugins=[("broken", BrokenPlugin())])
    algo = make(algorithm, "gym:CartPole-v1", registry=registry,
                overrides=["steps=64", "num_envs=8", "algo.rollout_steps=4", "progress=false",
                           f"run_dir='{tmp_path}'"])
    with pytest.raises(PluginError) as raised:
        algo.train()
    assert str(raised.value) == message


def test_a_multi_agent_shape_error_names_the_agent():
    from rlf.training.on_policy import check_value_extras

    obs = {"a": np.zeros((3, 2)), "b": np.zeros((3, 2))}
    good = Acting({"a": np.zeros(3), "b": np.zeros(3)}, {"a": {"value": np.zeros(3)}, "b": {"value": np.zeros(3)}})
    check_value_extras(good, obs, "plugin 'p' (algorithm 'x')")
    bad = Acting(good.actions, {"a": {"value": np.zeros(3)}, "b": {"value": np.zeros((3, 1))}})
    with pytest.raises(PluginError, match=r"shape \(3, 1\) for 3 observations of agent 'b'; expected \(3,\)$"):
        check_value_extras(bad, obs, "plugin 'p' (algorithm 'x')")

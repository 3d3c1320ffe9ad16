"""Entry point: registers the ``a3c`` algorithm. Imports stay light: no torch until it is built."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import A3CConfig

    register("a3c", build_agent="rlf_plugin_a3c.factory:build_agent",
             build_learner="rlf_plugin_a3c.factory:build_learner", family=StrategyFamily.ON_POLICY,
             config=A3CConfig, default_env="gym:CartPole-v1", action_spaces=("discrete",), multi_agent=True)

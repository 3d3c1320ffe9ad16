"""Entry point: registers the ``a2c`` algorithm. Imports stay light: no torch until it is built."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import A2CConfig

    register("a2c", build_agent="rlf_plugin_a2c.factory:build_agent",
             build_learner="rlf_plugin_a2c.factory:build_learner", family=StrategyFamily.ON_POLICY,
             config=A2CConfig, default_env="gym:CartPole-v1", action_spaces=("discrete",), multi_agent=True,
             observation_spaces=("Box", "Discrete", "Dict", "Tuple"),  # what rlf.nn's encoders read
             run_defaults={"num_envs": 8})

"""Entry point: registers the ``random`` algorithm. Imports stay light (no torch)."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import RandomConfig

    register("random", build_agent="rlf_plugin_random.factory:build_agent",
             build_learner="rlf_plugin_random.factory:build_learner", family=StrategyFamily.OFF_POLICY,
             config=RandomConfig, default_env="gym:CartPole-v1", action_spaces=("discrete", "continuous"),
             # every space: the observations are only counted
             observation_spaces=("Box", "Discrete", "MultiBinary", "MultiDiscrete", "Dict", "Tuple"),
             run_defaults={"num_envs": 16})

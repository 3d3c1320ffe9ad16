"""Entry point: registers the ``mixed`` algorithm. Imports stay light."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import MixedConfig
    from .factory import build_agent, build_learner

    register("mixed", build_agent=build_agent, build_learner=build_learner, family=StrategyFamily.OFF_POLICY,
             config=MixedConfig, default_env="predator-prey", action_spaces=("discrete",), multi_agent=True)

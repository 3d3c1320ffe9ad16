"""Entry point: registers the ``rnd`` algorithm. Imports stay light (no torch)."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import RNDConfig
    from .factory import build_agent, build_learner

    register("rnd", build_agent=build_agent, build_learner=build_learner, family=StrategyFamily.ON_POLICY,
             config=RNDConfig, default_env="mario", action_spaces=("discrete",),
             run_defaults={"num_envs": 8})

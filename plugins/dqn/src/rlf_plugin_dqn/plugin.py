"""Entry point: registers the ``dqn`` algorithm. Imports stay light (no torch)."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import DQNConfig
    from .factory import build_agent, build_learner

    register("dqn", build_agent=build_agent, build_learner=build_learner, family=StrategyFamily.OFF_POLICY,
             config=DQNConfig, default_env="gym:CartPole-v1", action_spaces=("discrete",), multi_agent=True)

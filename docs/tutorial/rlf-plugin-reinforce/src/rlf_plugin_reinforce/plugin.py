"""Entry point: registers ``reinforce``. No torch here: `rlf list` imports this module."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import ReinforceConfig

    register("reinforce",
             build_agent="rlf_plugin_reinforce.factory:build_agent",
             build_learner="rlf_plugin_reinforce.factory:build_learner",
             family=StrategyFamily.ON_POLICY,
             config=ReinforceConfig,
             default_env="gym:CartPole-v1",
             action_spaces=("discrete",),
             run_defaults={"num_envs": 8})

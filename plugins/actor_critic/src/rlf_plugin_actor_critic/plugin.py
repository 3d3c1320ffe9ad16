"""Entry point: registers the ``actor-critic`` algorithm. Imports stay light: no torch until it is built."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import ActorCriticConfig

    register("actor-critic", build_agent="rlf_plugin_actor_critic.factory:build_agent",
             build_learner="rlf_plugin_actor_critic.factory:build_learner", family=StrategyFamily.ON_POLICY,
             config=ActorCriticConfig, default_env="gym:CartPole-v1", action_spaces=("discrete",),
             observation_spaces=("Box", "Discrete", "Dict", "Tuple"),  # what rlf.nn's encoders read
             multi_agent=True, run_defaults={"num_envs": 8})

"""Entry point: registers the ``cql`` algorithm. Imports stay light."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import CQLConfig

    register("cql", build_agent="rlf_plugin_cql.factory:build_agent",
             build_learner="rlf_plugin_cql.factory:build_learner", family=StrategyFamily.OFF_POLICY,
             config=CQLConfig, default_env="predator-prey", action_spaces=("discrete",), multi_agent=True,
             run_defaults={"num_envs": 8})

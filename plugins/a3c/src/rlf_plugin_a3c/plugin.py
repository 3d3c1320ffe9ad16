"""Entry point: registers the ``a3c`` algorithm and the ``async-workers`` strategy family it runs on.
Imports stay light: no torch until it is built."""

from rlf import RegisterAlgorithm, RegisterStrategy, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_strategies(register: RegisterStrategy):
    from .config import AsyncWorkersConfig

    register("async-workers", strategy="rlf_plugin_a3c.strategy:AsyncWorkersStrategy", config=AsyncWorkersConfig,
             description="on-policy worker processes learning on one shared model (A3C)")


@hookimpl
def rlf_register_algorithms(register: RegisterAlgorithm):
    from .config import A3CConfig

    register("a3c", build_agent="rlf_plugin_a3c.factory:build_agent",
             build_learner="rlf_plugin_a3c.factory:build_learner", family="async-workers",
             config=A3CConfig, default_env="gym:CartPole-v1", action_spaces=("discrete",), multi_agent=True,
             observation_spaces=("Box", "Discrete"))  # rlf.nn.ObservationEncoder reads no other

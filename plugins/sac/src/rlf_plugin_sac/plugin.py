"""Entry point: registers the ``sac`` algorithm. Imports stay light: the builders are named, and the
core imports them (and torch) only when a SAC agent is built."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import SACConfig  # pydantic only

    register("sac", build_agent="rlf_plugin_sac.factory:build_agent",
             build_learner="rlf_plugin_sac.factory:build_learner", family=StrategyFamily.OFF_POLICY,
             config=SACConfig, default_env="gym:Pendulum-v1", action_spaces=("continuous",), multi_agent=True,
             observation_spaces=("Box", "Discrete"))  # rlf.nn.ObservationEncoder reads no other

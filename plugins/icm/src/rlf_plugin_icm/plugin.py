"""Entry point: registers the ``icm`` algorithm. Imports stay light (no torch)."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from rlf_plugin_ppo.factory import build_agent  # torch-free; ICM acts with PPO's agent unchanged

    from .config import ICMConfig

    register("icm", build_agent=build_agent, build_learner="rlf_plugin_icm.learner:build_learner",
             family=StrategyFamily.ON_POLICY, config=ICMConfig, default_env="mario", action_spaces=("discrete",),
             observation_spaces=("Box", "Discrete"),  # rlf.nn.ObservationEncoder reads no other
             run_defaults={"num_envs": 8}, presets={"mario": "rlf_plugin_icm:presets/mario.toml"})

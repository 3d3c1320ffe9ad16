"""Entry point: registers the ``rnd`` algorithm. Imports stay light (no torch)."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from rlf_plugin_ppo.factory import build_agent  # torch-free; RND acts with PPO's agent unchanged

    from .config import RNDConfig

    register("rnd", build_agent=build_agent, build_learner="rlf_plugin_rnd.learner:build_learner",
             family=StrategyFamily.ON_POLICY, config=RNDConfig, default_env="mario", action_spaces=("discrete",),
             observation_spaces=("Box", "Discrete"),  # rlf.nn.ObservationEncoder reads no other
             run_defaults={"num_envs": 8}, presets={"mario": "rlf_plugin_rnd:presets/mario.toml"})

"""Entry point: registers the ``ppo`` algorithm. Imports stay light (no torch) until it is built."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import PPOConfig
    from .factory import build_agent, build_learner

    register("ppo", build_agent=build_agent, build_learner=build_learner, family=StrategyFamily.ON_POLICY,
             config=PPOConfig, default_env="gym:CartPole-v1", action_spaces=("discrete", "continuous"),
             observation_spaces=("Box", "Discrete", "Dict", "Tuple"),  # what rlf.nn.ObservationEncoder reads
             run_defaults={"num_envs": 8},
             presets={"gym:CartPole-v1": "rlf_plugin_ppo:presets/cartpole.toml",
                      "gym:Pendulum-v1": "rlf_plugin_ppo:presets/pendulum.toml",
                      "gym:rlf.envs.cartpole_positions:CartPolePositions-v1":
                          "rlf_plugin_ppo:presets/cartpole_positions.toml",
                      "gym:HalfCheetah-v5": "rlf_plugin_ppo:presets/halfcheetah.toml",
                      "gym:Hopper-v5": "rlf_plugin_ppo:presets/hopper.toml",
                      "gym:Walker2d-v5": "rlf_plugin_ppo:presets/walker2d.toml",
                      "mario": "rlf_plugin_ppo:presets/mario.toml"})

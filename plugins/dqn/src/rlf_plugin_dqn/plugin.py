"""Entry point: registers the ``dqn`` algorithm. Imports stay light: the builders are named, and the
core imports them (and torch) only when a DQN is built."""

from rlf import StrategyFamily, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_algorithms(register):
    from .config import DQNConfig  # pydantic only

    register("dqn", build_agent="rlf_plugin_dqn.factory:build_agent",
             build_learner="rlf_plugin_dqn.factory:build_learner", family=StrategyFamily.OFF_POLICY,
             config=DQNConfig, default_env="gym:CartPole-v1", action_spaces=("discrete",), multi_agent=True,
             observation_spaces=("Box", "Discrete", "Dict", "Tuple"),  # what rlf.nn's encoders read
             presets={"gym:CartPole-v1": "rlf_plugin_dqn:presets/cartpole.toml",
                      "mario": "rlf_plugin_dqn:presets/mario.toml"})

"""Entry point: registers the ``actor-learner`` strategy family and the ``appo`` algorithm on it.
Imports stay light: no torch until something is built."""

from rlf import RegisterAlgorithm, RegisterStrategy, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_strategies(register: RegisterStrategy):
    from .config import ActorLearnerConfig

    register("actor-learner", strategy="rlf_plugin_appo.strategy:ActorLearnerStrategy", config=ActorLearnerConfig,
             description="actor processes send fixed-length chunks with behaviour log-probs; the learner "
                         "updates on each as it arrives (APPO)")


@hookimpl
def rlf_register_algorithms(register: RegisterAlgorithm):
    from .config import APPOConfig

    register("appo", build_agent="rlf_plugin_appo.factory:build_agent",
             build_learner="rlf_plugin_appo.factory:build_learner", family="actor-learner", config=APPOConfig,
             default_env="gym:CartPole-v1", action_spaces=("discrete",),
             observation_spaces=("Box", "Discrete"),  # rlf.nn.ObservationEncoder reads no other
             multi_agent=False,  # one policy learns from one agent's chunks
             run_defaults={"num_envs": 8},
             presets={"gym:CartPole-v1": "rlf_plugin_appo:presets/cartpole.toml",
                      "mario": "rlf_plugin_appo:presets/mario.toml"})

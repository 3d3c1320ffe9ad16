"""rlf: a reinforcement-learning framework where a new algorithm is a plugin, not a rewrite.

Everything a plugin may import is exported here. Heavy parts (training machinery, Gymnasium) load
on first use, so ``rlf list`` and plugin discovery stay fast.
"""

from .callbacks import Callback, Logger
from .config import (
    AlgorithmConfig,
    CollectorConfig,
    EnvConfig,
    ExplorationConfig,
    OffPolicyConfig,
    OnPolicyConfig,
    RunConfig,
    StrictModel,
)
from .errors import CheckpointError, ConfigError, IncompatibleError, PluginError, RlfError, UnknownNameError
from .exploration import EpsilonSchedule
from .hookspecs import (
    RegisterAlgorithm,
    RegisterCallback,
    RegisterCollector,
    RegisterEnvironment,
    RegisterLogger,
    RegisterStrategy,
    hookimpl,
)
from .interfaces import (
    EPISODE_METRICS,
    SINGLE_AGENT,
    Acting,
    Agent,
    AgentArrays,
    AgentBatch,
    BuildContext,
    EnvSpec,
    Learner,
    Rollout,
    StateTree,
    Transitions,
)
from .plugins import API_VERSION, StrategyFamily

__version__ = "0.1.0"

_LAZY = {
    "make": ("api", "make"),
    "load": ("api", "load"),
    "export": ("api", "export"),
    "resolve": ("api", "resolve"),
    "Algorithm": ("api", "Algorithm"),
    "compute_gae": ("training.on_policy", "compute_gae"),
    "ReplayBuffer": ("replay", "ReplayBuffer"),
    "RunningNormalizer": ("normalize", "RunningNormalizer"),
    "Trainer": ("training.trainer", "Trainer"),
    "TrainStrategy": ("training.strategy", "TrainStrategy"),
    "StepResult": ("training.strategy", "StepResult"),
    "BaseStrategy": ("training.strategy", "BaseStrategy"),
    "EpisodeTracker": ("training.strategy", "EpisodeTracker"),
    "OnPolicyStrategy": ("training.on_policy", "OnPolicyStrategy"),
    "OffPolicyStrategy": ("training.off_policy", "OffPolicyStrategy"),
    "collect_rollout": ("training.on_policy", "collect_rollout"),
    "registry": ("plugins", "registry"),
    "VectorEnv": ("envs", "VectorEnv"),
    "StepBatch": ("envs", "StepBatch"),
    "EnvFactory": ("envs", "EnvFactory"),
    "make_vector_env": ("envs", "make_vector_env"),
    "StatefulEnv": ("env_state", "StatefulEnv"),
    "StateUnavailable": ("env_state", "StateUnavailable"),
    "register_state_adapter": ("env_state", "register_state_adapter"),
    "generator_state": ("env_state", "generator_state"),
    "generator_from_state": ("env_state", "generator_from_state"),
    "checkpoint": ("checkpoint", None),
    "torch_utils": ("torch_utils", None),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'rlf' has no attribute {name!r}")
    from importlib import import_module

    module_name, attribute = _LAZY[name]
    module = import_module(f".{module_name}", __name__)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


__all__ = [
    "API_VERSION", "EPISODE_METRICS", "SINGLE_AGENT", "Acting", "Agent", "AgentArrays", "AgentBatch", "AlgorithmConfig",
    "BuildContext", "Callback", "CheckpointError", "CollectorConfig", "ConfigError", "EnvConfig", "EnvSpec", "EpsilonSchedule",
    "ExplorationConfig", "IncompatibleError", "Learner", "OffPolicyConfig", "OnPolicyConfig", "PluginError",
    "Logger", "RegisterAlgorithm", "RegisterCallback", "RegisterCollector", "RegisterEnvironment",
    "RegisterLogger", "RegisterStrategy", "RlfError", "Rollout", "RunConfig", "StateTree", "StrategyFamily", "StrictModel", "Transitions",
    "UnknownNameError", "hookimpl", *_LAZY,
]

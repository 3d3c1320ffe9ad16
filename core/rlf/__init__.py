"""rlf: a reinforcement-learning framework where a new algorithm is a plugin, not a rewrite.

Everything a plugin may import is exported here. Heavy parts (training machinery, Gymnasium) load
on first use, so ``rlf list`` and plugin discovery stay fast.
"""

from rlf.config import (
    AlgorithmConfig,
    CollectorConfig,
    EnvConfig,
    ExplorationConfig,
    OffPolicyConfig,
    OnPolicyConfig,
    RunConfig,
    StrictModel,
)
from rlf.errors import (
    CheckpointError,
    ConfigError,
    IncompatibleError,
    PluginError,
    RlfError,
    UnknownNameError,
)
from rlf.interfaces import (
    EPISODE_METRICS,
    SINGLE_AGENT,
    Acting,
    Agent,
    AgentArrays,
    AgentBatch,
    BuildContext,
    EnvSpec,
    Learner,
    PolicyExport,
    Resume,
    Rollout,
    StateTree,
    StepResult,
    Transitions,
)
from rlf.lazy import lazy_exports
from rlf.logging.callbacks import Callback, Logger
from rlf.plugins.hookspecs import (
    RegisterAlgorithm,
    RegisterCallback,
    RegisterCollector,
    RegisterEnvironment,
    RegisterLogger,
    RegisterStrategy,
    hookimpl,
)
from rlf.plugins.specs import API_VERSION, StrategyFamily
from rlf.training.exploration import EpsilonSchedule
from rlf.version import __version__ as __version__

_LAZY = {
    "make": ("api", "make"),
    "load": ("saved", "load"),
    "export": ("saved", "export"),
    "remove_run": ("api", "remove_run"),
    "resolve": ("resolution", "resolve"),
    "Algorithm": ("api", "Algorithm"),
    "compute_gae": ("training.on_policy", "compute_gae"),
    "ReplayBuffer": ("training.replay", "ReplayBuffer"),
    "RunningNormalizer": ("nn.normalize", "RunningNormalizer"),
    "Trainer": ("training.trainer", "Trainer"),
    "TrainStrategy": ("training.strategy", "TrainStrategy"),
    "BaseStrategy": ("training.strategy", "BaseStrategy"),
    "EpisodeTracker": ("training.episodes", "EpisodeTracker"),
    "OnPolicyStrategy": ("training.on_policy", "OnPolicyStrategy"),
    "OffPolicyStrategy": ("training.off_policy", "OffPolicyStrategy"),
    "collect_rollout": ("training.on_policy", "collect_rollout"),
    "registry": ("plugins.loading", "registry"),
    "plugin_call": ("training.startup", "plugin_call"),
    "VectorEnv": ("envs.base", "VectorEnv"),
    "StepBatch": ("envs.base", "StepBatch"),
    "EnvFactory": ("envs.base", "EnvFactory"),
    "make_vector_env": ("envs.collectors", "make_vector_env"),
    "StatefulEnv": ("envs.state", "StatefulEnv"),
    "StateUnavailable": ("envs.state", "StateUnavailable"),
    "register_state_adapter": ("envs.state", "register_state_adapter"),
    "generator_state": ("envs.state", "generator_state"),
    "generator_from_state": ("envs.state", "generator_from_state"),
    "checkpoint": ("storage.checkpoint", None),
    "torch_utils": ("nn.torch_utils", None),
}


__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "API_VERSION", "EPISODE_METRICS", "SINGLE_AGENT", "Acting", "Agent", "AgentArrays", "AgentBatch", "AlgorithmConfig",
    "BuildContext", "Callback", "CheckpointError", "CollectorConfig", "ConfigError", "EnvConfig", "EnvSpec", "EpsilonSchedule",
    "ExplorationConfig", "IncompatibleError", "Learner", "PolicyExport", "OffPolicyConfig", "OnPolicyConfig", "PluginError",
    "Logger", "RegisterAlgorithm", "RegisterCallback", "RegisterCollector", "RegisterEnvironment",
    "RegisterLogger", "RegisterStrategy", "Resume", "RlfError", "Rollout", "RunConfig", "StateTree", "StepResult", "StrategyFamily", "StrictModel", "Transitions",
    "UnknownNameError", "hookimpl", *_LAZY,
]

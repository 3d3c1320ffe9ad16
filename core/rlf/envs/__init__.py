"""Environments seen by the strategies: vector envs over N copies, their worker processes, exact-resume
state, and the core's own collectors (``sync``, ``async``) and ``gym:<id>`` environments.

Names load on first use: discovery and ``rlf list`` never import Gymnasium's vector machinery.
"""

from rlf.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["EnvFactory", "EnvProbe", "StepBatch", "VectorEnv", "describe_env", "check_actions",
                     "action_kinds", "is_multi_agent", "probe_of"], "base"),
    "InProcessVectorEnv": "inprocess",
    **dict.fromkeys(["Supervision", "exit_description", "worker_context", "prestart_workers", "PIPELINE_PARTS"],
                   "workers"),
    "GymVector": "gym_vector",
    "ParallelVector": "pettingzoo",
    **dict.fromkeys(["Collector", "make_vector_env", "build_sync_collector", "build_async_collector"], "collectors"),
    **dict.fromkeys(["StatefulEnv", "StateUnavailable", "register_state_adapter", "get_env_state",
                     "set_env_states", "generator_state", "generator_from_state"], "state"),
    **dict.fromkeys(["GymEnvConfig", "make_gym_env"], "gym"),
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

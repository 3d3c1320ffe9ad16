"""rlf-plugin-dqn: deep Q-learning for discrete actions, single- and multi-agent.

Names load on first use: the ``rlf`` entry point (``rlf_plugin_dqn.plugin``) imports this package,
and plugin discovery must not pay for importing torch.
"""

from importlib import import_module

_EXPORTS = {
    "DQNAgent": "agent", "DQNConfig": "config", "DQNLearner": "learner", "FrameReplay": "replay",
    "QNetwork": "model", "build_q_network": "model", "observation_layout": "model",
    "build_agent": "factory", "build_learner": "factory",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_EXPORTS)

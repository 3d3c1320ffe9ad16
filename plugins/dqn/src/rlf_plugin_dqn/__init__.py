"""rlf-plugin-dqn: deep Q-learning for discrete actions, single- and multi-agent.

Names load on first use: the ``rlf`` entry point (``rlf_plugin_dqn.plugin``) imports this package,
and plugin discovery must not pay for importing torch.
"""

from rlf.lazy import lazy_exports

_EXPORTS = {
    "DQNAgent": "agent", "DQNConfig": "config", "DQNLearner": "learner", "FrameReplay": "replay",
    "QNetwork": "model", "build_q_network": "model", "observation_layout": "model",
    "build_agent": "factory", "build_learner": "factory",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)

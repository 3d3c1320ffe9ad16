"""rlf-plugin-sac: Soft Actor-Critic for continuous (Box) actions.

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_sac.plugin`` and
therefore this package) does not import torch.
"""

from rlf.lazy import lazy_exports

_EXPORTS = {
    "build_agent": "factory",
    "build_learner": "factory",
    "SACConfig": "config",
    "SACAgent": "model",
    "SACLearner": "learner",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

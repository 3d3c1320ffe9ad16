"""rlf-plugin-ppo: Proximal Policy Optimization, and the extension point curiosity plugins build on.

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_ppo.plugin`` and
therefore this package) does not import torch.
"""

from rlf.lazy import lazy_exports

_EXPORTS = {
    "build_agent": "factory",
    "build_learner": "factory",
    "learner_with": "factory",
    "PPOConfig": "config",
    "PPOAgent": "model",
    "PPOLearner": "learner",
    "PPOExtension": "extension",
    "Minibatch": "extension",
    "ObsInput": "model",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

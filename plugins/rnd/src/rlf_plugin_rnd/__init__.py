"""rlf-plugin-rnd: PPO with Random Network Distillation (Burda et al. 2018).

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_rnd.plugin`` and
therefore this package) does not import torch.
"""

from rlf.lazy import lazy_exports

_EXPORTS = {
    "RNDConfig": "config",
    "RNDExtension": "learner",
    "RNDNetworks": "model",
    "build_learner": "learner",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

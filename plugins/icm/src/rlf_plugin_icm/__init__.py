"""rlf-plugin-icm: PPO with the Intrinsic Curiosity Module (Pathak et al. 2017).

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_icm.plugin`` and
therefore this package) does not import torch.
"""

from rlf.lazy import lazy_exports

_EXPORTS = {
    "ICMConfig": "config",
    "ICMExtension": "learner",
    "ICMModule": "model",
    "build_learner": "learner",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

"""rlf-plugin-icm: PPO with the Intrinsic Curiosity Module (Pathak et al. 2017).

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_icm.plugin`` and
therefore this package) does not import torch.
"""

from importlib import import_module

_EXPORTS = {
    "ICMConfig": "config",
    "ICMExtension": "learner",
    "ICMModule": "model",
    "build_learner": "learner",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rlf_plugin_icm' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = list(_EXPORTS)

"""rlf-plugin-rnd: PPO with Random Network Distillation (Burda et al. 2018).

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_rnd.plugin`` and
therefore this package) does not import torch.
"""

from importlib import import_module

_EXPORTS = {
    "RNDConfig": "config",
    "RNDExtension": "learner",
    "RNDNetworks": "model",
    "build_learner": "learner",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rlf_plugin_rnd' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = list(_EXPORTS)

"""rlf-plugin-sac: Soft Actor-Critic for continuous (Box) actions.

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_sac.plugin`` and
therefore this package) does not import torch.
"""

from importlib import import_module

_EXPORTS = {
    "build_agent": "factory",
    "build_learner": "factory",
    "SACConfig": "config",
    "SACAgent": "model",
    "SACLearner": "learner",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rlf_plugin_sac' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = list(_EXPORTS)

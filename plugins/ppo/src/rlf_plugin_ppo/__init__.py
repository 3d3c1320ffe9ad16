"""rlf-plugin-ppo: Proximal Policy Optimization, and the extension point curiosity plugins build on.

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_ppo.plugin`` and
therefore this package) does not import torch.
"""

from importlib import import_module

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rlf_plugin_ppo' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = list(_EXPORTS)

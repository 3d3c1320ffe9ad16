"""rlf-plugin-knn: PPO with kNN episodic novelty (Never Give Up's episodic module, Badia et al. 2020).

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_knn.plugin`` and
therefore this package) does not import torch.
"""

from importlib import import_module

_EXPORTS = {
    "KNNConfig": "config",
    "KNNExtension": "learner",
    "Embedding": "model",
    "EpisodicMemory": "model",
    "build_learner": "learner",
}


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rlf_plugin_knn' has no attribute {name!r}")
    value = getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = list(_EXPORTS)

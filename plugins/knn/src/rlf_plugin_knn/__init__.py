"""rlf-plugin-knn: PPO with kNN episodic novelty (Never Give Up's episodic module, Badia et al. 2020).

Names load on first use, so discovering the plugin (which imports ``rlf_plugin_knn.plugin`` and
therefore this package) does not import torch.
"""

from rlf.lazy import lazy_exports

_EXPORTS = {
    "KNNConfig": "config",
    "KNNExtension": "learner",
    "Embedding": "model",
    "EpisodicMemory": "model",
    "build_learner": "learner",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

"""rlf-plugin-knn: PPO with kNN episodic novelty (Never Give Up's episodic module, Badia et al. 2020)."""

from .config import KNNConfig
from .factory import build_agent, build_learner
from .learner import KNNExtension
from .model import Embedding, EpisodicMemory

__all__ = ["KNNConfig", "KNNExtension", "Embedding", "EpisodicMemory", "build_agent", "build_learner"]

"""rlf-plugin-rnd: PPO with Random Network Distillation (Burda et al. 2018)."""

from .config import RNDConfig
from .factory import build_agent, build_learner
from .learner import RNDExtension
from .model import RNDNetworks, RunningMeanStd

__all__ = ["RNDConfig", "RNDExtension", "RNDNetworks", "RunningMeanStd", "build_agent", "build_learner"]

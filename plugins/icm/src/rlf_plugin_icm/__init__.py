"""rlf-plugin-icm: PPO with the Intrinsic Curiosity Module (Pathak et al. 2017)."""

from .config import ICMConfig
from .factory import build_agent, build_learner
from .learner import ICMExtension
from .model import ICMModule

__all__ = ["ICMConfig", "ICMExtension", "ICMModule", "build_agent", "build_learner"]

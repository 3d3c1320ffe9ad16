"""rlf-plugin-dqn: deep Q-learning for discrete actions, single- and multi-agent.

Importing this package imports torch; the ``rlf`` entry point (``plugin.py``) does not.
"""

from .agent import DQNAgent
from .config import DQNConfig
from .factory import build_agent, build_learner
from .learner import DQNLearner
from .model import QNetwork, build_q_network, observation_layout
from .replay import FrameReplay

__all__ = ["DQNAgent", "DQNConfig", "DQNLearner", "FrameReplay", "QNetwork", "build_agent", "build_learner",
           "build_q_network", "observation_layout"]

"""rlf-plugin-cql: centralized tabular Q-learning (PPAGE's predator-prey baseline), one joint table over every agent."""

from .config import CQLConfig
from .factory import build_agent, build_learner
from .learner import CQLLearner
from .model import CQLAgent

__all__ = ["CQLAgent", "CQLConfig", "CQLLearner", "build_agent", "build_learner"]

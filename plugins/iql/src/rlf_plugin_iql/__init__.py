"""rlf-plugin-iql: independent tabular Q-learning (PPAGE's predator-prey baseline), one Q-table per agent."""

from .config import IQLConfig
from .factory import build_agent, build_learner
from .learner import IQLLearner
from .model import IQLAgent, KeyCache, QTable, StateKeys, greedy, random_state, set_random_state

__all__ = ["IQLAgent", "IQLConfig", "IQLLearner", "KeyCache", "QTable", "StateKeys", "build_agent",
           "build_learner", "greedy", "random_state", "set_random_state"]

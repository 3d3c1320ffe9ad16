"""rlf-plugin-mixed: IQL or CQL per team (PPAGE's MixedTrainer), both updated every step."""

from .config import MixedConfig
from .factory import build_agent, build_learner
from .learner import MixedLearner
from .model import MixedAgent, Team, split_teams

__all__ = ["MixedAgent", "MixedConfig", "MixedLearner", "Team", "build_agent", "build_learner", "split_teams"]

"""rlf-plugin-random: the uniform random baseline."""

from .factory import RandomAgent, build_agent, build_learner

__all__ = ["RandomAgent", "build_agent", "build_learner"]

"""KNN acts with PPO's policy unchanged; only the learner differs (PPO's learner plus the KNN extension)."""

from __future__ import annotations

from rlf_plugin_ppo import PPOLearner, build_agent

from rlf import Agent, BuildContext

from .learner import KNNExtension

__all__ = ["build_agent", "build_learner"]


def build_learner(context: BuildContext, agent: Agent) -> PPOLearner:
    return PPOLearner(agent, context.config, context, extension=KNNExtension(context))

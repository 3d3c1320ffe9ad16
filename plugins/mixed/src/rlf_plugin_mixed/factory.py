"""Builders the core calls: a team of IQL and/or CQL agents from the env's ``teams`` metadata."""

from __future__ import annotations

from rlf import BuildContext

from .learner import MixedLearner
from .model import MixedAgent


def build_agent(context: BuildContext) -> MixedAgent:
    return MixedAgent(context.env_spec, context.config, context.seed)


def build_learner(context: BuildContext, agent: MixedAgent) -> MixedLearner:
    return MixedLearner(agent, context.config.alpha, context.config.gamma)

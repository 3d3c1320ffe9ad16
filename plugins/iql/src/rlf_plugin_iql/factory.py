"""Builders the core calls: the agent from the env's spec, the learner around it."""

from __future__ import annotations

from rlf import BuildContext

from .learner import IQLLearner
from .model import IQLAgent, StateKeys


def build_agent(context: BuildContext) -> IQLAgent:
    spec = context.env_spec
    return IQLAgent(spec.agent_ids, {a: spec.action_spaces[a].n for a in spec.agent_ids},
                    StateKeys(spec.metadata), context.config.exploration, context.seed)


def build_learner(context: BuildContext, agent: IQLAgent) -> IQLLearner:
    return IQLLearner(agent, context.config.alpha, context.config.gamma)

"""Builders the core calls: one joint table over every agent of the env."""

from __future__ import annotations

from rlf_plugin_iql import StateKeys

from rlf import BuildContext

from .learner import CQLLearner
from .model import CQLAgent


def build_agent(context: BuildContext) -> CQLAgent:
    spec, config = context.env_spec, context.config
    return CQLAgent(spec.agent_ids, {a: spec.action_spaces[a].n for a in spec.agent_ids}, StateKeys(spec.metadata),
                    config.exploration, context.seed, config.max_joint_actions, config.max_table_mib)


def build_learner(context: BuildContext, agent: CQLAgent) -> CQLLearner:
    return CQLLearner(agent, context.config.alpha, context.config.gamma)

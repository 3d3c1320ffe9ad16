"""Builders the core calls: ``build_agent(context)`` and ``build_learner(context, agent)``."""

from __future__ import annotations

from rlf import BuildContext
from rlf.nn.torch_utils import resolve_device

from .agent import DQNAgent, encoder_state_dim
from .learner import DQNLearner


def build_agent(context: BuildContext) -> DQNAgent:
    return DQNAgent(context.env_spec, context.config, context.seed, resolve_device(context.device))


def build_learner(context: BuildContext, agent: DQNAgent) -> DQNLearner:
    return DQNLearner(agent, context.config, context.seed, encoder_state_dim(context.env_spec),
                      save_replay=context.run.save_replay)

"""Builders the core calls: ``build_agent(context)`` and ``build_learner(context, agent)``."""

from __future__ import annotations

from rlf import BuildContext
from rlf.nn.torch_utils import resolve_device

from .learner import SACLearner
from .model import SACAgent


def build_agent(context: BuildContext) -> SACAgent:
    return SACAgent(context.env_spec, context.config, context.seed, resolve_device(context.device))


def build_learner(context: BuildContext, agent: SACAgent) -> SACLearner:
    return SACLearner(agent, context.config, context.seed, save_replay=context.run.save_replay)

"""The builders the registry calls; torch is imported inside them, so ``rlf list`` stays fast."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlf import BuildContext

if TYPE_CHECKING:
    from .agent import APPOAgent
    from .learner import APPOLearner


def build_agent(context: BuildContext) -> APPOAgent:
    from .agent import APPOAgent

    return APPOAgent(context.env_spec, context.config, context.seed, context.device)


def build_learner(context: BuildContext, agent: APPOAgent) -> APPOLearner:
    from .learner import APPOLearner

    return APPOLearner(agent, context.config, context)

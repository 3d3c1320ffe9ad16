"""The builders the registry calls. Curiosity plugins register ``build_agent`` unchanged and wrap
``PPOLearner`` with their own ``PPOExtension``; their config must subclass ``PPOConfig``.

torch is imported inside the builders: registering the plugin (``rlf list``) must stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlf import BuildContext

if TYPE_CHECKING:
    from .learner import PPOLearner
    from .model import PPOAgent


def build_agent(context: BuildContext) -> PPOAgent:
    from .model import PPOAgent

    return PPOAgent(context.env_spec, context.config, context.seed, context.device)


def build_learner(context: BuildContext, agent: PPOAgent) -> PPOLearner:
    from .learner import PPOLearner

    return PPOLearner(agent, context.config, context)

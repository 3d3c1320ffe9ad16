"""ICM acts with PPO's policy unchanged (PPO's own ``build_agent``); only the learner differs: PPO's
learner with the ICM extension. torch loads inside the builder, so registering the plugin stays fast."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlf_plugin_ppo import build_agent

from rlf import Agent, BuildContext

if TYPE_CHECKING:
    from rlf_plugin_ppo.learner import PPOLearner

__all__ = ["build_agent", "build_learner"]


def build_learner(context: BuildContext, agent: Agent) -> PPOLearner:
    from rlf_plugin_ppo.learner import PPOLearner

    from .learner import ICMExtension

    return PPOLearner(agent, context.config, context, extension=ICMExtension(context))

"""The builders the registry calls. Curiosity plugins register ``build_agent`` unchanged and build
their learner with ``learner_with(TheirExtension)``; their config must subclass ``PPOConfig``.

torch is imported inside the builders: registering the plugin (``rlf list``) must stay fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rlf import BuildContext

if TYPE_CHECKING:
    from .extension import PPOExtension
    from .learner import PPOLearner
    from .model import PPOAgent


def build_agent(context: BuildContext) -> PPOAgent:
    from .model import PPOAgent

    return PPOAgent(context.env_spec, context.config, context.seed, context.device)


def build_learner(context: BuildContext, agent: PPOAgent) -> PPOLearner:
    from .learner import PPOLearner

    return PPOLearner(agent, context.config, context)


def learner_with(extension: Callable[[BuildContext], PPOExtension]) -> Callable[[BuildContext, PPOAgent], PPOLearner]:
    """A ``build_learner`` for an algorithm that acts with PPO's agent unchanged and learns with PPO's
    learner plus ``extension`` (a ``PPOExtension`` class, built from the context). A curiosity plugin
    needs only this in its learner module, beside its extension::

        build_learner = learner_with(ICMExtension)

    and registers ``build_agent="rlf_plugin_ppo.factory:build_agent"``,
    ``build_learner="rlf_plugin_icm.learner:build_learner"`` (strings: discovery imports no torch).
    Its config must subclass ``PPOConfig``."""

    def build_learner(context: BuildContext, agent: PPOAgent) -> PPOLearner:
        from .learner import PPOLearner

        return PPOLearner(agent, context.config, context, extension=extension(context))

    build_learner.__qualname__ = f"learner_with({getattr(extension, '__name__', extension)})"
    return build_learner

"""The two builders the core calls: the agent (networks, acting) and its learner."""

from __future__ import annotations

from rlf import BuildContext
from rlf.nn import set_threads
from rlf.nn.torch_utils import resolve_device

from .learner import A2CLearner
from .model import A2CAgent


def build_agent(context: BuildContext) -> A2CAgent:
    # Small MLPs run fastest on one thread; more only add synchronisation and oversubscription.
    set_threads(context.config.torch_threads)
    return A2CAgent(context.env_spec, context.config, context.seed, resolve_device(context.device))


def build_learner(context: BuildContext, agent: A2CAgent) -> A2CLearner:
    return A2CLearner(agent, context.config)

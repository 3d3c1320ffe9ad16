"""The two builders the core calls: the agent (networks, acting) and its learner."""

from __future__ import annotations

from rlf import BuildContext
from rlf.nn import set_threads
from rlf.nn.torch_utils import resolve_device

from .learner import ActorCriticLearner
from .model import ActorCriticAgent


def build_agent(context: BuildContext) -> ActorCriticAgent:
    # Small MLPs run fastest on one thread; more only add synchronisation and oversubscription.
    set_threads(context.config.torch_threads)
    return ActorCriticAgent(context.env_spec, context.config, context.seed, resolve_device(context.device))


def build_learner(context: BuildContext, agent: ActorCriticAgent) -> ActorCriticLearner:
    return ActorCriticLearner(agent, context.config)

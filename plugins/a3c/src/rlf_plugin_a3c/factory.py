"""The two builders the core calls: the agent (networks, acting) and its learner."""

from __future__ import annotations

import torch

from rlf import BuildContext, ConfigError
from rlf.nn import set_threads
from rlf.nn.torch_utils import resolve_device

from .learner import A3CLearner
from .model import A3CAgent


def build_agent(context: BuildContext) -> A3CAgent:
    # Small MLPs run fastest on one thread; more only add synchronisation and oversubscription.
    set_threads(context.config.torch_threads)
    device = resolve_device(context.device)
    if context.config.async_workers and device.type != "cpu":
        if context.device != "auto":
            raise ConfigError(f"a3c workers share one model in CPU shared memory, so it cannot live on "
                              f"{context.device}; set device='cpu' or algo.async_workers=0")
        device = torch.device("cpu")
    return A3CAgent(context.env_spec, context.config, context.seed, device)


def build_learner(context: BuildContext, agent: A3CAgent) -> A3CLearner:
    return A3CLearner(context, agent)

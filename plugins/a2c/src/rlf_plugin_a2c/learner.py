"""The update: policy gradient on the core's n-step advantages, squared error on its returns, entropy bonus.

With the defaults (``rollout_steps = n = 5``, ``gae_lambda = 1``) the core hands over, per agent and
step t of the rollout, ``returns = r_t + gamma r_{t+1} + ... + gamma^k V(s_{t+k})`` cut at episode
ends (bootstrapped from the final observation on truncation, not on termination) and
``advantages = returns - V(s_t)``: A2C's n-step targets, each step bootstrapping from the end of
the rollout.
"""

from __future__ import annotations

import torch
from rlf_plugin_actor_critic.learner import ActorCriticLearner, summarize

__all__ = ["A2CLearner", "summarize"]


class A2CLearner(ActorCriticLearner):
    """The actor-critic update on n-step targets (the core computes them from ``rollout_steps`` and
    ``gae_lambda = 1``), with the actor and the critic at their own learning rates."""

    def make_optimizer(self, net: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW([
            {"params": net.actor.parameters(), "lr": self.config.actor_lr,
             "weight_decay": self.config.actor_weight_decay},
            {"params": net.critic.parameters(), "lr": self.config.critic_lr, "weight_decay": 0.0},
        ])

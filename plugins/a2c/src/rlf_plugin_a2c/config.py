"""A2C's configuration. ``rollout_steps`` (the n of the n-step return), ``gamma`` and ``gae_lambda``
come from ``rlf.OnPolicyConfig``: the core's on-policy strategy collects the rollout and computes the
advantages with them, and with ``gae_lambda = 1`` those are exactly A2C's n-step advantages."""

from __future__ import annotations

from pydantic import Field
from rlf_plugin_actor_critic.config import ActorCriticFamilyConfig


class A2CConfig(ActorCriticFamilyConfig):
    """Synchronous n-step advantage actor-critic (PPAGE's A2C), one actor and critic per agent."""

    rollout_steps: int = Field(
        5, ge=1, le=100_000, description="n: env steps per env in each update and in each n-step return.")
    gae_lambda: float = Field(
        1.0, ge=0.0, le=1.0,
        description="1 = n-step returns bootstrapped at the rollout's end (A2C); below 1 = GAE over the rollout.")
    actor_lr: float = Field(3e-4, gt=0.0, le=1.0, description="AdamW learning rate of the actor.")
    critic_lr: float = Field(1e-3, gt=0.0, le=1.0, description="AdamW learning rate of the critic.")
    entropy_coef: float = Field(0.05, ge=0.0, le=10.0, description="Weight of the policy entropy bonus.")
    actor_weight_decay: float = Field(
        0.0, ge=0.0, le=1.0, description="Decoupled (AdamW) weight decay on the actor's parameters only.")
    normalize_returns: bool = Field(
        False,
        description="Critic learns returns standardised by running float64 statistics; advantages scaled alike.")

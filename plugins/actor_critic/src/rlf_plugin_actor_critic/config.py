"""ActorCritic's configuration. ``rollout_steps``, ``gamma`` and ``gae_lambda`` come from
``rlf.OnPolicyConfig``: the core's on-policy strategy collects the rollout and computes the
advantages with them, and with ``gae_lambda = 0`` those are exactly one-step TD errors."""

from __future__ import annotations

from pydantic import Field, field_validator

from rlf import OnPolicyConfig


class ActorCriticFamilyConfig(OnPolicyConfig):
    """What ActorCritic, A2C and A3C share: the loss weights, gradient clipping and the networks."""

    value_coef: float = Field(0.5, ge=0.0, le=100.0, description="Weight of the critic's squared-error loss.")
    entropy_coef: float = Field(0.01, ge=0.0, le=10.0, description="Weight of the policy entropy bonus.")
    normalize_returns: bool = Field(
        True,
        description="Critic learns returns standardised by running float64 statistics; advantages scaled alike.")
    max_grad_norm: float = Field(
        5.0, ge=0.0, le=1000.0, description="Clip each agent's gradient norm per update to this (0 = off).")
    hidden_sizes: list[int] = Field(
        [64, 64], min_length=1, max_length=8, description="Hidden layer widths of the actor and of the critic MLP.")
    torch_threads: int = Field(
        1, ge=0, le=1024, description="CPU threads torch uses in this process (0 = torch's default).")

    @field_validator("hidden_sizes")
    @classmethod
    def _widths(cls, value: list[int]) -> list[int]:
        if any(width < 1 or width > 65_536 for width in value):
            raise ValueError("every hidden width must be between 1 and 65536")
        return value


class ActorCriticConfig(ActorCriticFamilyConfig):
    """One-step temporal-difference actor-critic (PPAGE's ActorCritic), one actor and critic per agent."""

    rollout_steps: int = Field(
        1, ge=1, le=100_000,
        description="Env steps per env between updates (1 = learn after every step, the online algorithm).")
    gae_lambda: float = Field(
        0.0, ge=0.0, le=1.0,
        description="0 = one-step TD advantages; above 0 mixes in longer returns when rollout_steps > 1.")
    lr: float = Field(1e-3, gt=0.0, le=1.0, description="AdamW learning rate of the actor and the critic.")
    actor_weight_decay: float = Field(
        1e-3, ge=0.0, le=1.0, description="Decoupled (AdamW) weight decay on the actor's parameters only.")

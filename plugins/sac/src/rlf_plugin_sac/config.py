"""SAC's validated configuration. Defaults follow Stable-Baselines3's SAC (which CleanRL's mostly
share); the actor-process settings come from ``rlf.OffPolicyConfig``. The epsilon schedule inherited
from it is not used: SAC explores by sampling its own stochastic policy."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, ValidationInfo, field_validator

from rlf import OffPolicyConfig

HiddenWidth = Annotated[int, Field(ge=1, le=65_536)]


class SACConfig(OffPolicyConfig):
    """Soft Actor-Critic (Haarnoja et al. 2018): a tanh-squashed Gaussian policy, twin Q-networks with
    Polyak-averaged targets, and an entropy temperature tuned towards a target entropy."""

    actor_lr: float = Field(3e-4, gt=0.0, le=1.0, description="Adam learning rate of the policy.")
    critic_lr: float = Field(3e-4, gt=0.0, le=1.0, description="Adam learning rate of the twin Q-networks.")
    alpha_lr: float = Field(3e-4, gt=0.0, le=1.0, description="Adam learning rate of log(alpha) (with autotune).")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor of the soft TD target.")
    tau: float = Field(0.005, gt=0.0, le=1.0, description="Polyak factor: target <- tau * online + (1 - tau) * target.")
    batch_size: int = Field(256, ge=1, le=65_536, description="Transitions sampled per gradient step.")
    buffer_size: int = Field(1_000_000, ge=1, le=100_000_000, description="Replay capacity per agent, in transitions.")
    learning_starts: int = Field(
        100, ge=0, le=100_000_000,
        description="Env steps (all envs together) of uniformly random actions before learning starts.")
    train_frequency: int = Field(1, ge=1, le=1_000_000, description="Env steps (all envs together) between updates.")
    gradient_steps: int = Field(1, ge=1, le=100_000, description="Gradient steps per agent at each update.")
    policy_frequency: int = Field(
        1, ge=1, le=1_000, description="Critic gradient steps per policy and temperature step (CleanRL uses 2).")
    target_update_interval: int = Field(1, ge=1, le=1_000_000, description="Gradient steps between Polyak updates.")
    hidden_sizes: list[HiddenWidth] = Field(
        default_factory=lambda: [256, 256], min_length=1, max_length=8,
        description="Hidden layer widths of the policy and of each Q-network (ReLU).")
    autotune: bool = Field(True, description="Tune the entropy temperature alpha towards target_entropy.")
    alpha: float = Field(1.0, gt=0.0, le=1e6, description="Entropy temperature: the fixed value, or autotune's start.")
    target_entropy: float | None = Field(
        None, ge=-1e6, le=1e6, description="Entropy the temperature aims for (None: -action dimensions).")
    torch_threads: int = Field(
        0, ge=0, le=1024, description="CPU threads torch uses in this process (0 = auto: 1 for these MLPs).")

    @field_validator("buffer_size")
    @classmethod
    def _replay_fits_batch(cls, value: int, info: ValidationInfo) -> int:
        batch_size = info.data.get("batch_size")
        if batch_size is not None and value < batch_size:
            raise ValueError(f"must be at least batch_size ({batch_size})")
        return value

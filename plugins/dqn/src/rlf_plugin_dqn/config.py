"""DQN's validated configuration. The exploration schedule, actor count and actor sync interval come
from ``rlf.OffPolicyConfig``; everything here is what the Q-learning update itself needs."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator

from rlf import OffPolicyConfig

HiddenWidth = Annotated[int, Field(ge=1, le=65_536)]


class DQNConfig(OffPolicyConfig):
    """Deep Q-learning with a target network, optional double-DQN target and dueling head."""

    lr: float = Field(5e-4, gt=0.0, le=1.0, description="Adam learning rate.")
    adam_eps: float = Field(1e-8, gt=0.0, le=1.0, description="Adam epsilon (Atari-style runs often use 1.5e-4).")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor of the TD target.")
    reward_scale: float = Field(
        1.0, gt=0.0, le=1e6,
        description="Rewards are multiplied by this for learning; keeps Q near the SmoothL1 loss's quadratic zone.")
    batch_size: int = Field(64, ge=1, le=65_536, description="Transitions sampled per gradient step.")
    buffer_size: int = Field(50_000, ge=1, le=100_000_000, description="Replay capacity per agent, in transitions.")
    min_replay_size: int = Field(
        1_000, ge=1, le=100_000_000,
        description="Transitions in an agent's replay before it learns (at least batch_size).")
    target_update_interval: int = Field(
        500, ge=1, le=100_000_000,
        description="Optimizer steps between hard target-network syncs (one counter shared by all agents).")
    train_frequency: int = Field(
        1, ge=1, le=1_000_000, description="Env steps (all envs together) between learning updates.")
    gradient_steps: int = Field(1, ge=1, le=100_000, description="Gradient steps per agent at each learning update.")
    double_dqn: bool = Field(True, description="Online network selects the next action, target network evaluates it.")
    dueling: bool = Field(False, description="Dueling head: Q = V + A - mean(A).")
    network: Literal["auto", "mlp", "cnn"] = Field(
        "auto", description="auto: the Nature CNN for images ((C, H, W) or (H, W, C), C <= 16, H and W >= 36; "
                            "rlf.nn.image_layout), an MLP for everything else.")
    hidden_sizes: list[HiddenWidth] = Field(
        default_factory=lambda: [128, 128], min_length=1, max_length=8,
        description="MLP hidden layer widths (vector observations).")
    cnn_hidden: int = Field(512, ge=1, le=65_536, description="Width of the Nature CNN's fully connected layer.")
    max_grad_norm: float = Field(10.0, gt=0.0, le=1e9, description="Gradient-norm clip per optimizer step.")
    backend: Literal["torch", "fast"] = Field(
        "torch", description="torch: every forward through nn.Module (the reference); fast: small MLPs on the CPU "
                             "act in numpy (rlf.nn.NumpyMLP) and learn without nn.Module's call overhead "
                             "(model.direct_forward), the same ops and results in ~1/5 of the acting time.")
    torch_threads: int = Field(
        0, ge=0, le=256,
        description="CPU threads torch uses in this process (0 = auto: 1 for MLPs; for CNNs 1 while acting "
                    "and torch's default while learning).")
    frame_replay: Literal["auto", "on", "off"] = Field(
        "auto", description="Store image stacks as single frames plus indices (auto: for uint8 images).")

    @field_validator("buffer_size")
    @classmethod
    def _replay_fits_batch(cls, value: int, info: ValidationInfo) -> int:
        batch_size = info.data.get("batch_size")
        if batch_size is not None and value < batch_size:
            raise ValueError(f"must be at least batch_size ({batch_size})")
        return value

"""REINFORCE's settings. The inherited ``gamma``, ``gae_lambda`` and ``rollout_steps`` are read by the
core, which computes the returns; this class changes two of their defaults and adds its own."""

from pydantic import Field

from rlf import OnPolicyConfig


class ReinforceConfig(OnPolicyConfig):
    """REINFORCE: a policy network trained on normalized discounted returns-to-go."""

    rollout_steps: int = Field(256, ge=1, le=100_000, description="Env steps per env before each update.")
    gae_lambda: float = Field(1.0, ge=0.0, le=1.0, description="1 = Monte-Carlo returns (REINFORCE).")
    lr: float = Field(0.01, gt=0.0, le=1.0, description="Adam learning rate.")
    hidden: int = Field(64, ge=1, le=4096, description="Width of the policy's hidden layer.")

"""ICM's configuration: all of PPO's fields plus the curiosity module's."""

from __future__ import annotations

from pydantic import Field
from rlf_plugin_ppo import PPOConfig


class ICMConfig(PPOConfig):
    """PPO plus the Intrinsic Curiosity Module (Pathak et al. 2017)."""

    eta: float = Field(
        0.01, ge=0.0, le=1000.0,
        description="Intrinsic reward scale: r_int = eta/2 * ||forward prediction - phi(s')||^2.")
    beta: float = Field(
        0.2, ge=0.0, le=1.0,
        description="Curiosity loss split: beta * forward loss + (1 - beta) * inverse loss.")
    policy_weight: float = Field(
        0.1, gt=0.0, le=1.0,
        description="lambda: weight of the policy loss against the curiosity loss (total = lambda*PPO + ICM).")
    feature_dim: int = Field(
        288, ge=4, le=4096,
        description="MLP encoder output width (the conv encoder's width follows from the image size).")
    hidden_size: int = Field(256, ge=8, le=4096, description="Hidden width of the encoder MLP, inverse and forward models.")
    normalize_intrinsic: bool = Field(
        False,
        description="Divide the intrinsic reward by a running std of its discounted return (gamma), as the "
                    "large-scale curiosity study does; the forward error's raw size otherwise drifts with training.")
    intrinsic_coef: float = Field(
        1.0, ge=0.0, le=1000.0,
        description="With normalize_intrinsic: weight of the normalised intrinsic reward (eta then cancels out).")

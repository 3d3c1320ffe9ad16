"""RND's configuration: all of PPO's fields plus the distillation, normalisation and two-stream fields."""

from __future__ import annotations

from pydantic import Field
from rlf_plugin_ppo import PPOConfig


class RNDConfig(PPOConfig):
    """PPO plus Random Network Distillation (Burda et al. 2018)."""

    int_gamma: float = Field(
        0.99, ge=0.0, le=1.0,
        description="Discount of the intrinsic return (non-episodic); the extrinsic one is gamma.")
    ext_coef: float = Field(2.0, ge=0.0, le=100.0, description="Weight of the extrinsic advantage in the sum.")
    int_coef: float = Field(1.0, ge=0.0, le=100.0, description="Weight of the intrinsic advantage in the sum.")
    predictor_update_proportion: float = Field(
        1.0, gt=0.0, le=1.0,
        description="Share of each minibatch the predictor trains on (Burda et al.: 0.25 with 128 envs).")
    output_dim: int = Field(512, ge=4, le=4096, description="Width of the target and predictor outputs.")
    hidden_size: int = Field(256, ge=8, le=4096, description="Hidden width of the MLP target, predictor and value head.")
    obs_clip: float = Field(5.0, gt=0.0, le=100.0, description="Normalised observations are clipped to +-obs_clip.")
    image_frames: int = Field(
        1, ge=1, le=64,
        description="Image stacks: how many of the most recent frames the target and predictor see.")
    int_value_coef: float = Field(0.5, ge=0.0, le=100.0, description="Weight of the intrinsic value head's loss.")

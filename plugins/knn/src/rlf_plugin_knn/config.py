"""kNN episodic novelty's configuration: all of PPO's fields plus the episodic memory's."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from rlf_plugin_ppo import PPOConfig


class KNNConfig(PPOConfig):
    """PPO plus the episodic novelty module of Never Give Up (Badia et al. 2020)."""

    embedding: Literal["inverse_dynamics", "random"] = Field(
        "inverse_dynamics",
        description="inverse_dynamics: a learned controllable-state encoder; random: a fixed random projection.")
    embedding_dim: int = Field(32, ge=2, le=1024, description="Width of the embeddings kept in the episodic memory.")
    hidden_size: int = Field(128, ge=8, le=4096, description="Hidden width of the encoder MLP and the inverse model.")
    intrinsic_coef: float = Field(
        0.3, ge=0.0, le=100.0, description="beta: the episodic reward is scaled by this before PPO adds it.")
    neighbours: int = Field(10, ge=1, le=1000, description="k: nearest neighbours the pseudo-count sums over.")
    kernel_epsilon: float = Field(1e-3, gt=0.0, le=10.0, description="Kernel eps/(d + eps) on normalised distances.")
    cluster_distance: float = Field(
        8e-3, ge=0.0, le=10.0, description="Normalised distances below this count as the same state (set to 0).")
    pseudo_count_constant: float = Field(
        1e-3, gt=0.0, le=10.0, description="c in r = 1/(sqrt(sum of kernels) + c).")
    max_similarity: float = Field(
        8.0, gt=0.0, le=1e6, description="No reward where sqrt(sum of kernels) + c exceeds this.")
    distance_momentum: float = Field(
        0.99, ge=0.0, lt=1.0, description="Decay of the running mean of k-NN squared distances used to normalise.")
    memory_size: int = Field(
        5000, ge=1, le=1_000_000,
        description="Embeddings kept per env and episode; the oldest are overwritten beyond this.")
    inverse_loss_coef: float = Field(1.0, ge=0.0, le=100.0, description="Weight of the inverse-dynamics loss.")

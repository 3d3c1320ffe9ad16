"""Embeddings and the per-env episodic memory of Never Give Up's episodic novelty module."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from rlf.nn import ObservationEncoder, mlp, nature_cnn


class Embedding(nn.Module):
    """A learned controllable-state encoder (trained through an inverse model), or a fixed random projection.

    Actions are PPO's 0-based ids.
    """

    def __init__(self, observation_space: spaces.Space, n_actions: int, network: str, kind: str, dim: int,
                 hidden: int):
        super().__init__()
        # PPO's observation encoding with the same ``network`` setting: the embedding sees what the policy sees
        self.inputs = ObservationEncoder(observation_space, network)
        self.kind, self.n_actions = kind, n_actions
        if kind == "random":
            # Random Gaussian projections keep pairwise distances roughly intact (Johnson-Lindenstrauss).
            self.register_buffer("projection", torch.randn(self.inputs.features, dim) / np.sqrt(dim))
            return
        if self.inputs.image:
            self.encoder = nature_cnn(self.inputs.shape, dim, out_activation=False)
        else:
            self.encoder = mlp(self.inputs.features, [hidden], dim)
        self.inverse = mlp(2 * dim, [hidden], n_actions)

    @property
    def learned(self) -> bool:
        return self.kind != "random"

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.inputs(obs)
        if not self.learned:
            return x.reshape(len(x), -1) @ self.projection
        return self.encoder(x)

    def inverse_loss(self, obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Mean loss of predicting the action taken from the embeddings of s and s'."""
        logits = self.inverse(torch.cat([self(obs), self(next_obs)], dim=1))
        return F.cross_entropy(logits, actions.long().reshape(-1))


class EpisodicMemory:
    """Per-env memories of this episode's embeddings, and the novelty reward they give (NGU, Alg. 1)."""

    def __init__(self, num_envs: int, capacity: int, dim: int, device: torch.device, *, neighbours: int,
                 kernel_epsilon: float, cluster_distance: float, pseudo_count_constant: float,
                 max_similarity: float, distance_momentum: float):
        self.memory = torch.zeros(num_envs, capacity, dim, device=device)
        self.counts = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.capacity, self.device = capacity, device
        self.neighbours, self.kernel_epsilon, self.cluster_distance = neighbours, kernel_epsilon, cluster_distance
        self.pseudo_count_constant, self.max_similarity = pseudo_count_constant, max_similarity
        self.distance_momentum = distance_momentum
        self.mean_distance = 0.0
        self.distance_seen = False

    def reset(self, mask: torch.Tensor | None = None) -> None:
        """Forget the episode in the envs where ``mask`` is True (all envs without a mask)."""
        if mask is None:
            self.counts.zero_()
        else:
            self.counts[mask] = 0

    @property
    def empty(self) -> torch.Tensor:
        return self.counts == 0

    @property
    def filled(self) -> torch.Tensor:
        """Embeddings held per env (the count of this episode's states, up to the capacity)."""
        return torch.clamp(self.counts, max=self.capacity)

    def add(self, embeddings: torch.Tensor, mask: torch.Tensor) -> None:
        rows = torch.nonzero(mask).squeeze(1)
        if len(rows) == 0:
            return
        slots = self.counts[rows] % self.capacity  # a full memory overwrites its oldest entry
        self.memory[rows, slots] = embeddings[rows]
        self.counts[rows] += 1

    def novelty(self, embeddings: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """r = 1/(sqrt(sum_k eps/(d_k/mean_d - xi)_+ + eps) + c), 0 past max_similarity; (N,) for ``embeddings`` (N, D)."""
        filled = self.filled
        k = min(self.neighbours, int(filled.max().item()))
        rewards = torch.zeros(len(embeddings), device=self.device)
        if k == 0:
            return rewards
        used = int(filled.max().item())
        squared = (self.memory[:, :used] - embeddings[:, None, :]).pow(2).sum(dim=2)
        slot = torch.arange(used, device=self.device)
        squared = squared.masked_fill(slot[None, :] >= filled[:, None], float("inf"))
        nearest = torch.topk(squared, k, dim=1, largest=False).values
        valid = torch.isfinite(nearest) & mask[:, None]
        if not valid.any():
            return rewards
        batch_mean = float(nearest[valid].mean())
        if self.distance_seen:
            self.mean_distance = self.distance_momentum * self.mean_distance + (1 - self.distance_momentum) * batch_mean
        else:
            self.mean_distance, self.distance_seen = batch_mean, True
        normalised = torch.where(valid, nearest, torch.zeros_like(nearest)) / max(self.mean_distance, 1e-12)
        normalised = torch.clamp(normalised - self.cluster_distance, min=0.0)
        kernel = torch.where(valid, self.kernel_epsilon / (normalised + self.kernel_epsilon), torch.zeros_like(nearest))
        similarity = torch.sqrt(kernel.sum(dim=1)) + self.pseudo_count_constant
        rewards = torch.where(similarity > self.max_similarity, torch.zeros_like(similarity), 1.0 / similarity)
        return torch.where(valid.any(dim=1), rewards, torch.zeros_like(rewards))

    def state_dict(self) -> dict[str, Any]:
        return {"mean_distance": float(self.mean_distance), "distance_seen": bool(self.distance_seen)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean_distance = float(state["mean_distance"])
        self.distance_seen = bool(state["distance_seen"])

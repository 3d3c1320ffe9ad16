"""PPO's loss on one minibatch, as pure functions of tensors: what the ``torch`` backend runs (the
default) and what the ``numpy`` backend (numpy_update.py) reproduces by hand.

    loss = policy_loss + value_coef * value_loss - entropy_coef * entropy

with the clipped surrogate of Schulman et al. (2017), a squared-error value loss (optionally clipped
around the old value) and the mean entropy of the action distribution. The value loss is halved
(0.5 * squared error), as in CleanRL and Stable-Baselines3's ``value_loss`` they report.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


def clipped_surrogate_loss(log_ratio: torch.Tensor, advantages: torch.Tensor, clip: float) -> torch.Tensor:
    """The negated clipped surrogate: the mean of the larger of -A * r and -A * clamp(r, 1 - clip, 1 + clip)."""
    ratio = log_ratio.exp()
    return torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip)).mean()


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               value_clip: float = 0.0) -> torch.Tensor:
    """0.5 * squared error to the returns; with ``value_clip`` > 0, the worse of that and the error of
    the prediction clipped to within ``value_clip`` of the old value."""
    if value_clip <= 0:
        return 0.5 * (values - returns).pow(2).mean()
    clipped = old_values + (values - old_values).clamp(-value_clip, value_clip)
    return 0.5 * torch.max((values - returns).pow(2), (clipped - returns).pow(2)).mean()


class PPOLoss(NamedTuple):
    loss: torch.Tensor
    """What the optimizer minimises (with gradients)."""
    stats: torch.Tensor
    """Detached (policy_loss, value_loss, entropy, approx_kl, clip_fraction), in ``STAT_NAMES`` order."""


def ppo_loss(logits: torch.Tensor, values: torch.Tensor, actions: torch.Tensor, old_log_probs: torch.Tensor,
             old_values: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor, *, clip: float,
             value_coef: float, entropy_coef: float, value_clip: float = 0.0) -> PPOLoss:
    """PPO's loss for a categorical policy: ``logits`` (B, A) and ``values`` (B,) from the network,
    the rest from the rollout (advantages already normalised if they are to be)."""
    log_probs = torch.log_softmax(logits, dim=-1)
    new_log_prob = log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)
    entropy = -(log_probs.exp() * log_probs).sum(dim=-1).mean()
    return policy_loss(new_log_prob, entropy, values, old_log_probs, old_values, advantages, returns, clip=clip,
                       value_coef=value_coef, entropy_coef=entropy_coef, value_clip=value_clip)


def policy_loss(new_log_prob: torch.Tensor, entropy: torch.Tensor, values: torch.Tensor,
                old_log_probs: torch.Tensor, old_values: torch.Tensor, advantages: torch.Tensor,
                returns: torch.Tensor, *, clip: float, value_coef: float, entropy_coef: float,
                value_clip: float = 0.0) -> PPOLoss:
    """PPO's loss for any policy, from the log-probabilities (B,) of the rollout's actions under the
    current policy and its mean entropy: what a categorical and a Gaussian policy share."""
    log_ratio = new_log_prob - old_log_probs
    policy = clipped_surrogate_loss(log_ratio, advantages, clip)
    value = value_loss(values, old_values, returns, value_clip)
    loss = policy + value_coef * value - entropy_coef * entropy
    with torch.no_grad():
        ratio = log_ratio.exp()
        approx_kl = ((ratio - 1) - log_ratio).mean()  # the low-variance estimator of KL(old || new)
        clip_fraction = ((ratio - 1).abs() > clip).float().mean()
        stats = torch.stack([policy.detach(), value.detach(), entropy.detach(), approx_kl, clip_fraction])
    return PPOLoss(loss, stats)

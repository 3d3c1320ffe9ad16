"""Random Network Distillation's networks and running statistics (Burda et al. 2018)."""

from __future__ import annotations

import torch
from gymnasium import spaces
from torch import nn

from rlf.nn import ObservationEncoder, flat_size, init_orthogonal, mlp, nature_cnn


def _conv_trunk(channels: int, shape: tuple[int, ...]) -> nn.Sequential:
    # PPO only picks the CNN for images of at least 36x36, which the Nature stack accepts.
    return nature_cnn((channels, *shape[1:]), None, activation=nn.LeakyReLU)


class RNDNetworks(nn.Module):
    """A fixed random target, the predictor trained to match it, and the intrinsic value head."""

    def __init__(self, observation_space: spaces.Space, network: str, frames: int, output_dim: int, hidden: int):
        super().__init__()
        # PPO's observation encoding with the same ``network`` setting: RND sees what the policy sees
        self.inputs = ObservationEncoder(observation_space, network)
        if self.inputs.image:
            shape = self.inputs.shape
            self.frames = min(frames, shape[0])
            rnd_shape: tuple[int, ...] = (self.frames, *shape[1:])
            target_trunk, predictor_trunk = _conv_trunk(self.frames, shape), _conv_trunk(self.frames, shape)
            width = flat_size(target_trunk, rnd_shape)
            self.target = nn.Sequential(target_trunk, nn.Linear(width, output_dim))
            self.predictor = nn.Sequential(predictor_trunk, *mlp(width, [512, 512], output_dim))
            value_trunk = _conv_trunk(shape[0], shape)
            self.value_head = nn.Sequential(value_trunk, *mlp(flat_size(value_trunk, shape), [256], 1))
        else:
            self.frames = 0
            size = self.inputs.features
            rnd_shape = (size,)
            self.target = mlp(size, [hidden, hidden], output_dim, activation=nn.LeakyReLU)
            self.predictor = mlp(size, [hidden, hidden, hidden], output_dim, activation=nn.LeakyReLU)
            self.value_head = mlp(size, [hidden, hidden], 1, activation=nn.Tanh)
        self.rnd_shape = rnd_shape
        for part in (self.target, self.predictor, self.value_head):
            init_orthogonal(part)
        nn.init.orthogonal_(self.value_head[-1].weight, 1.0)
        self.target.requires_grad_(False)

    def rnd_input(self, obs: torch.Tensor) -> torch.Tensor:
        """What target and predictor look at (before normalising): the latest frames of an image stack."""
        x = self.inputs(obs)
        return x[:, -self.frames:] if self.inputs.image else x

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.inputs(obs)).squeeze(-1)

    def distillation_error(self, normalised: torch.Tensor) -> torch.Tensor:
        """Per-sample mean squared error of the predictor against the fixed target."""
        with torch.no_grad():
            target = self.target(normalised)
        return (self.predictor(normalised) - target).pow(2).mean(dim=1)

    def parameters_to_train(self) -> list[nn.Parameter]:
        return [*self.predictor.parameters(), *self.value_head.parameters()]

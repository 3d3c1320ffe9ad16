"""Random Network Distillation's networks and running statistics (Burda et al. 2018)."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from rlf_plugin_ppo.model import ObsInput
from torch import nn


def _orthogonal(module: nn.Module, gain: float = np.sqrt(2)) -> nn.Module:
    for layer in module.modules():
        if isinstance(layer, nn.Linear | nn.Conv2d):
            nn.init.orthogonal_(layer.weight, gain)
            nn.init.zeros_(layer.bias)
    return module


def _conv_trunk(channels: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(channels, 32, 8, stride=4), nn.LeakyReLU(),
                         nn.Conv2d(32, 64, 4, stride=2), nn.LeakyReLU(),
                         nn.Conv2d(64, 64, 3, stride=1), nn.LeakyReLU(), nn.Flatten())


def _flat_size(trunk: nn.Module, shape: tuple[int, ...]) -> int:
    # PPO only picks the CNN for images of at least 36x36, which this Nature-style stack accepts.
    with torch.no_grad():
        return int(trunk(torch.zeros(1, *shape)).shape[1])


class RNDNetworks(nn.Module):
    """A fixed random target, the predictor trained to match it, and the intrinsic value head."""

    def __init__(self, observation_space: spaces.Space, network: str, frames: int, output_dim: int, hidden: int):
        super().__init__()
        self.inputs = ObsInput(observation_space, network)
        if self.inputs.image:
            shape = self.inputs.shape
            self.frames = min(frames, shape[0])
            rnd_shape: tuple[int, ...] = (self.frames, *shape[1:])
            target_trunk, predictor_trunk = _conv_trunk(self.frames), _conv_trunk(self.frames)
            width = _flat_size(target_trunk, rnd_shape)
            self.target = nn.Sequential(target_trunk, nn.Linear(width, output_dim))
            self.predictor = nn.Sequential(predictor_trunk, nn.Linear(width, 512), nn.ReLU(),
                                           nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, output_dim))
            value_trunk = _conv_trunk(shape[0])
            self.value_head = nn.Sequential(value_trunk, nn.Linear(_flat_size(value_trunk, shape), 256), nn.ReLU(),
                                            nn.Linear(256, 1))
        else:
            self.frames = 0
            size = self.inputs.shape[0]
            rnd_shape = (size,)
            self.target = nn.Sequential(nn.Linear(size, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden),
                                        nn.LeakyReLU(), nn.Linear(hidden, output_dim))
            self.predictor = nn.Sequential(nn.Linear(size, hidden), nn.LeakyReLU(), nn.Linear(hidden, hidden),
                                           nn.LeakyReLU(), nn.Linear(hidden, hidden), nn.LeakyReLU(),
                                           nn.Linear(hidden, output_dim))
            self.value_head = nn.Sequential(nn.Linear(size, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                            nn.Linear(hidden, 1))
        self.rnd_shape = rnd_shape
        for part in (self.target, self.predictor, self.value_head):
            _orthogonal(part)
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

"""Q-networks: an MLP for vector observations, the Nature-DQN CNN for uint8 image stacks, and an
optional dueling head on either."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf import ConfigError

from .config import DQNConfig

NATURE_MIN_SIDE = 36
"""Smallest image side the Nature CNN's three convolutions (8/4, 4/2, 3/1) still fit."""


@dataclass(frozen=True)
class ObservationLayout:
    """How one agent's observations reach the network."""

    shape: tuple[int, ...]
    image: bool
    """A uint8 image stack fed to the CNN (scaled by 1/255 inside the network)."""
    channels_last: bool = False
    """(H, W, C) rather than (C, H, W); the stack axis is then the last one."""

    @property
    def stack_axis(self) -> int:
        return -1 if self.channels_last else 0


def _looks_like_image(space: spaces.Space) -> bool:
    return isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def _channels_last(shape: tuple[int, ...]) -> bool:
    # (84, 84, 4): the channel count is far smaller than the sides; (4, 84, 84) is channels-first
    return shape[2] < shape[0] and shape[2] < shape[1] and shape[0] >= NATURE_MIN_SIDE


def observation_layout(space: spaces.Space, network: str) -> ObservationLayout:
    if not isinstance(space, spaces.Box):
        raise ConfigError(f"DQN needs Box observations, got {space}; wrap the env to give arrays")
    shape = tuple(int(s) for s in space.shape)
    image = _looks_like_image(space)
    if network == "cnn" and not image:
        raise ConfigError(f"algo.network=cnn needs uint8 image observations (C, H, W), got {space.dtype} {shape}; "
                          "use algo.network=mlp or auto")
    if network == "mlp" or not image:
        return ObservationLayout(shape, image=False)
    channels_last = _channels_last(shape)
    height, width = (shape[0], shape[1]) if channels_last else (shape[1], shape[2])
    if min(height, width) < NATURE_MIN_SIDE:
        if network == "cnn":
            raise ConfigError(f"algo.network=cnn needs images of at least {NATURE_MIN_SIDE}x{NATURE_MIN_SIDE}, "
                              f"got {height}x{width}; use algo.network=mlp")
        return ObservationLayout(shape, image=False)
    return ObservationLayout(shape, image=True, channels_last=channels_last)


class NatureTorso(nn.Module):
    """Three convolutions and a dense layer (Mnih et al. 2015); input uint8, scaled here."""

    def __init__(self, layout: ObservationLayout, hidden: int):
        super().__init__()
        self.channels_last = layout.channels_last
        channels = layout.shape[-1] if layout.channels_last else layout.shape[0]
        self.convs = nn.Sequential(
            nn.Conv2d(channels, 32, kernel_size=8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )
        probe_shape = (1, channels, *(layout.shape[:2] if layout.channels_last else layout.shape[1:]))
        with torch.no_grad():
            flat = self.convs(torch.zeros(probe_shape)).shape[1]
        self.dense = nn.Sequential(nn.Linear(flat, hidden), nn.ReLU())
        self.out_features = hidden

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = obs.float() / 255.0
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return self.dense(self.convs(x))


class MLPTorso(nn.Module):
    def __init__(self, layout: ObservationLayout, hidden_sizes: list[int]):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = int(np.prod(layout.shape))
        for size in hidden_sizes:
            layers += [nn.Linear(width, size), nn.ReLU()]
            width = size
        self.body = nn.Sequential(*layers)
        self.out_features = width

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(obs.float())


class QNetwork(nn.Module):
    def __init__(self, torso: nn.Module, n_actions: int, dueling: bool):
        super().__init__()
        self.torso = torso
        self.dueling = dueling
        self.advantage = nn.Linear(torso.out_features, n_actions)
        self.value = nn.Linear(torso.out_features, 1) if dueling else None

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        features = self.torso(obs)
        advantage = self.advantage(features)
        if self.value is None:
            return advantage
        # subtracting the mean makes V and A identifiable without changing argmax Q
        return self.value(features) + advantage - advantage.mean(dim=1, keepdim=True)


def build_q_network(layout: ObservationLayout, n_actions: int, config: DQNConfig) -> QNetwork:
    torso = NatureTorso(layout, config.cnn_hidden) if layout.image else MLPTorso(layout, config.hidden_sizes)
    return QNetwork(torso, n_actions, config.dueling)

"""Random Network Distillation's networks and running statistics (Burda et al. 2018)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from rlf_plugin_ppo.model import ObservationEncoder, image_layout
from torch import nn


class ObsInput(nn.Module):
    """PPO's own observation encoding (one-hot ids, pixels / 255), channels-first for images, flat otherwise.

    The image rule is PPO's ``network`` setting, so curiosity sees observations the way the policy does.
    """

    def __init__(self, space: spaces.Space, network: str):
        super().__init__()
        self.encode = ObservationEncoder(space)
        layout = image_layout(space)
        self.image = network == "cnn" or (network == "auto" and layout is not None)
        self.channels_last = self.image and layout == "hwc"
        if self.image:
            self.shape = tuple(space.shape) if layout == "chw" else (space.shape[2], *space.shape[:2])
        else:
            self.shape = (self.encode.one_hot or int(np.prod(space.shape)),)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.encode(obs)
        if not self.image:
            return x.reshape(len(x), -1)
        return x.permute(0, 3, 1, 2) if self.channels_last else x


class RunningMeanStd:
    """Mean and variance over every sample seen, merged batch by batch (Chan et al.'s parallel update)."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean = np.zeros(shape, dtype=np.float64)
        self.var = np.ones(shape, dtype=np.float64)
        self.count = 1e-4

    def update(self, batch: np.ndarray) -> None:
        if len(batch) == 0:
            return
        batch_mean, batch_var, batch_count = batch.mean(axis=0), batch.var(axis=0), len(batch)
        delta = batch_mean - self.mean
        total = self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": float(self.count)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.mean = np.array(state["mean"], dtype=np.float64)
        self.var = np.array(state["var"], dtype=np.float64)
        self.count = float(state["count"])


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

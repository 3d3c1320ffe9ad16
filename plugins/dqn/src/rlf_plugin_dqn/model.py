"""Q-networks: an MLP for vector observations, the Nature-DQN CNN for images (both from ``rlf.nn``,
which also decides what an image is and encodes the observations), and an optional dueling head."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional

from rlf.nn import MultiInputEncoder, ObservationEncoder, image_layout, mlp, nature_cnn

from .config import DQNConfig


@dataclass(frozen=True)
class ObservationLayout:
    """How one agent's observations are stored and reach the network."""

    shape: tuple[int, ...]
    """The raw observation shape (() for Discrete ids)."""
    dtype: np.dtype
    """What the replay stores: the space's own dtype for images and Discrete ids, float32 otherwise."""
    image: bool
    """An image fed to the Nature CNN (``rlf.nn.image_layout``)."""
    channels_last: bool = False
    """(H, W, C) rather than (C, H, W); the stack axis is then the last one."""
    space: spaces.Space | None = None
    """The Dict or Tuple space, for structured observations (then ``parts`` lays out each part)."""
    parts: dict | None = None
    """Part key -> its own ``ObservationLayout``, for Dict and Tuple observations."""

    @property
    def structured(self) -> bool:
        return self.parts is not None

    @property
    def stack_axis(self) -> int:
        return -1 if self.channels_last else 0

    @property
    def pixels(self) -> bool:
        """A uint8 image stack: what the frame-deduplicating replay can store."""
        return self.image and self.dtype == np.uint8


def observation_layout(space: spaces.Space, network: str, name: str = "this agent") -> ObservationLayout:
    if isinstance(space, spaces.Dict | spaces.Tuple):
        MultiInputEncoder(space, network, name=name, cnn_features=1)  # raises the one-line errors
        keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
        parts = {key: observation_layout(space[key], "mlp" if network == "mlp" else "auto", f"{name} (part {key!r})")
                 for key in keys}
        return ObservationLayout((), np.dtype(np.float32), image=False, space=space, parts=parts)
    encoder = ObservationEncoder(space, network, name=name)  # raises the one-line errors
    shape = tuple(int(s) for s in space.shape or ())
    if isinstance(space, spaces.Discrete):
        return ObservationLayout(shape, np.dtype(np.int64), image=False)
    if not encoder.image:
        return ObservationLayout(shape, np.dtype(np.float32), image=False)
    return ObservationLayout(shape, np.dtype(space.dtype), image=True, channels_last=image_layout(space) == "hwc")


class Torso(nn.Module):
    """The shared encoder, then the Nature CNN (images) or an MLP; ``out_features`` wide."""

    def __init__(self, encoder: ObservationEncoder | MultiInputEncoder, config: DQNConfig):
        super().__init__()
        self.encoder = encoder
        if encoder.image:  # a MultiInputEncoder's CNNs are its own: its output is a flat vector
            self.body = nature_cnn(encoder.shape, config.cnn_hidden)
            self.out_features = config.cnn_hidden
        else:
            self.body = mlp(encoder.features, config.hidden_sizes)
            self.out_features = config.hidden_sizes[-1]

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(self.encoder(obs))


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


def build_q_network(space: spaces.Space, n_actions: int, config: DQNConfig, name: str = "this agent") -> QNetwork:
    if isinstance(space, spaces.Dict | spaces.Tuple):
        encoder = MultiInputEncoder(space, config.network, name=name, cnn_features=config.cnn_hidden)
    else:
        encoder = ObservationEncoder(space, config.network, name=name)
    return QNetwork(Torso(encoder, config), n_actions, config.dueling)


def direct_forward(net: QNetwork) -> Callable[[torch.Tensor], torch.Tensor]:
    """``net``'s forward pass without nn.Module's call machinery, for plain MLP Q-networks (float vector
    observations, Linear/ReLU/Tanh layers, no dueling head); ``net`` itself for anything else.

    Why: a CartPole gradient step calls the 256x256 MLP twice, and each call went through ten
    ``Module.__call__`` frames (hook checks, forward-pre/post dispatch) around three small matmuls.
    The ops are the modules' own (``functional.linear`` on the same parameters, ``torch.relu``), in
    the same order, so the results are the same to the bit. Parameters are read at call time, so
    in-place writes (optimizer steps, ``load_state_dict``) and replaced tensors are both seen; no hooks
    are ever registered on these networks.
    """
    encoder = net.torso.encoder
    if isinstance(encoder, MultiInputEncoder):
        return net
    layers = [*net.torso.body, net.advantage] if isinstance(net.torso.body, nn.Sequential) else []
    plain = (layers and net.value is None and not encoder.one_hot and not encoder.image and not encoder.bounds
             and encoder.scale == 1.0 and all(isinstance(layer, nn.Linear | nn.ReLU | nn.Tanh) for layer in layers)
             and all(not getattr(layer, "inplace", False) for layer in layers))
    if not plain:
        return net
    linear, relu, tanh = functional.linear, torch.relu, torch.tanh
    steps = [(0, layer) if isinstance(layer, nn.Linear) else (1 if isinstance(layer, nn.ReLU) else 2, None)
             for layer in layers]

    def forward(obs: torch.Tensor) -> torch.Tensor:
        x = obs.float()  # the encoder's steps for plain float vectors
        x = x.reshape(len(x), -1)
        for kind, layer in steps:
            if kind == 0:
                x = linear(x, layer.weight, layer.bias)
            else:
                x = relu(x) if kind == 1 else tanh(x)
        return x

    return forward

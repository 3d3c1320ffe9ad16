"""A fast path beside the networks: acting with a small torch MLP's own weights in numpy (what
``algo.backend`` options of PPO and DQN use), kept apart so ``networks.py`` holds only the plain builders."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


class NumpyMLP:
    """The forward pass of a stack of ``nn.Linear``, ``nn.Tanh`` and ``nn.ReLU`` modules on the CPU, in
    numpy, for acting on a few observations.

    Why: acting on one CartPole observation is a handful of small matmuls, and torch's per-op dispatch,
    module calls and tensor wrapping cost far more than the arithmetic (CPU time per call, loaded
    machine: PPO's act 143 -> 47 us, DQN's greedy choice 57 -> 11 us; benchmarks/small_mlp_acting.py).
    The maths is the
    network's own: the arrays are views of the parameters' memory, so optimizer steps and
    ``load_state_dict`` (both write in place) show up at once. Call ``refresh`` if a parameter
    tensor is ever replaced rather than written. Learning stays in torch, with autograd.
    """

    def __init__(self, layers: Sequence[nn.Module]):
        self.modules = list(layers)
        self.refresh()

    @staticmethod
    def supports(layers: Sequence[nn.Module]) -> bool:
        layers = list(layers)
        return bool(layers) and all(isinstance(layer, nn.Linear | nn.Tanh | nn.ReLU) for layer in layers) and all(
            p.device.type == "cpu" and p.dtype == torch.float32 for layer in layers for p in layer.parameters())

    def refresh(self) -> None:
        self.steps: list[tuple[str, np.ndarray | None, np.ndarray | None]] = []
        for layer in self.modules:
            if isinstance(layer, nn.Linear):
                bias = layer.bias.detach().numpy() if layer.bias is not None else None
                self.steps.append(("linear", layer.weight.detach().numpy().T, bias))
            else:
                self.steps.append(("tanh" if isinstance(layer, nn.Tanh) else "relu", None, None))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        for kind, weight, bias in self.steps:
            if kind == "linear":
                x = x @ weight
                if bias is not None:
                    x += bias
            elif kind == "tanh":
                x = np.tanh(x, out=x)
            else:
                x = np.maximum(x, 0.0, out=x)
        return x

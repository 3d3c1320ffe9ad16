"""The network toolkit every torch plugin builds on: one rule for "this observation is an image", one
observation encoder, one MLP builder, one Nature CNN and the one place that sets torch's CPU threads.

This module imports torch at module level. Nothing in the core imports it, so ``import rlf`` and
plugin discovery stay torch-free; plugins import it inside their builders (``from rlf.nn.networks import mlp``).
It lives in the core rather than in a library plugin because every torch plugin needs it and it is
small: one more distribution to version, wheel and list in every plugin's dependencies would cost
more than these few hundred lines, and the core already owns torch's lazy helpers (``rlf.nn.torch_utils``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf.errors import ConfigError, IncompatibleError

__all__ = [
    "DEFAULT_TORCH_THREADS", "MAX_IMAGE_CHANNELS", "MIN_IMAGE_SIDE", "NATURE_CONVS", "ConvLayer",
    "MultiInputEncoder", "ObservationEncoder", "TorchThreads", "as_tensors", "conv_stack", "flat_size",
    "image_layout", "init_orthogonal", "mask_logits", "mlp", "nature_cnn", "set_threads",
]

NetworkChoice = Literal["auto", "mlp", "cnn"]

MIN_IMAGE_SIDE = 36
"""The smallest height/width the Nature CNN's convolutions (8/4, 4/2, 3/1) leave at least 1x1 of."""
MAX_IMAGE_CHANNELS = 16
"""More "channels" than this is not an image (colour planes or a stack of frames) but a feature map."""


# -- what an observation is ------------------------------------------------------------------------------
def image_layout(space: spaces.Space) -> Literal["chw", "hwc"] | None:
    """The one rule: a rank-3 Box is an image when one end axis is a small channel axis
    (<= ``MAX_IMAGE_CHANNELS``) and the other two are at least ``MIN_IMAGE_SIDE``; channels-first wins
    when both readings fit. Any dtype: uint8 pixels are scaled by 1/255 by the encoder, floats are not.

    Returns "chw", "hwc" or None (not an image: an MLP reads it flattened)."""
    if not isinstance(space, spaces.Box) or len(space.shape) != 3:
        return None
    c, h, w = space.shape
    if c <= MAX_IMAGE_CHANNELS and min(h, w) >= MIN_IMAGE_SIDE:
        return "chw"
    h, w, c = space.shape
    if c <= MAX_IMAGE_CHANNELS and min(h, w) >= MIN_IMAGE_SIDE:
        return "hwc"
    return None


class ObservationEncoder(nn.Module):
    """Raw observation batches to the float tensors a network's first layer reads.

    - ``Discrete(n, start)``: observations arrive as int64 indices of shape (N,); they become one-hot
      rows of width n.
    - image Boxes (see ``image_layout``; with ``network="auto"`` or ``"cnn"``): (N, C, H, W) floats,
      channels moved first for (H, W, C) spaces, uint8 pixels scaled by 1/255.
    - any other Box: flattened to (N, prod(shape)); uint8 scaled by 1/255; with ``bounds=True`` every
      dimension with finite bounds is mapped onto [-1, 1] instead (grid offsets of +-9 would saturate
      tanh units).

    ``shape`` is what the first layer gets ((C, H, W) or (features,)), ``image`` says which of the two.
    The encoder has no parameters and no state-dict entries, so adding it to a network changes no
    checkpoint.

    ``Dict`` and ``Tuple`` spaces get a ``MultiInputEncoder`` instead (``ObservationEncoder(space, ...)``
    returns one): its output is always one flat (N, features) vector, and it has parameters (a CNN per
    image part).
    """

    def __new__(cls, space: spaces.Space | None = None, *args, **kwargs):
        # space=None: copy.deepcopy and pickle make the object without arguments
        if cls is ObservationEncoder and isinstance(space, spaces.Dict | spaces.Tuple):
            # not a subclass, so Python does not run ObservationEncoder.__init__ on it as well
            return MultiInputEncoder(space, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, space: spaces.Space, network: NetworkChoice = "auto", *, bounds: bool = False,
                 name: str = "this agent", cnn_features: int = 512):
        """``cnn_features`` is read only where ``space`` is a Dict or Tuple (``MultiInputEncoder``), so one
        call serves every space."""
        super().__init__()
        if not isinstance(space, spaces.Box | spaces.Discrete):
            raise IncompatibleError(f"{name} observes {space}, but the networks read Box or Discrete observations; "
                              "flatten the observation in the environment (e.g. gymnasium FlattenObservation)")
        self.one_hot = int(space.n) if isinstance(space, spaces.Discrete) else 0
        self.offset = int(space.start) if isinstance(space, spaces.Discrete) else 0
        layout = image_layout(space)
        if network == "cnn" and layout is None:
            raise ConfigError(f"algo.network='cnn' needs image observations shaped (C, H, W) or (H, W, C) with "
                              f"H, W >= {MIN_IMAGE_SIDE} and C <= {MAX_IMAGE_CHANNELS}, but {name} observes "
                              f"{space}; use algo.network='mlp' or 'auto'")
        self.image = network != "mlp" and layout is not None
        self.channels_last = self.image and layout == "hwc"
        if self.image:
            self.shape: tuple[int, ...] = (tuple(int(s) for s in space.shape) if layout == "chw"
                                           else (int(space.shape[2]), int(space.shape[0]), int(space.shape[1])))
        else:
            self.shape = (self.one_hot or int(np.prod(space.shape)),)
        self.bounds = bounds and not self.one_hot and not self.image
        # uint8 pixels / 255; mapping the bounds onto [-1, 1] already covers them
        pixels = isinstance(space, spaces.Box) and space.dtype == np.uint8
        self.scale = 1.0 / 255.0 if pixels and not self.bounds else 1.0
        if self.bounds:
            low = np.asarray(space.low, dtype=np.float64).reshape(-1)
            high = np.asarray(space.high, dtype=np.float64).reshape(-1)
            finite = np.isfinite(low) & np.isfinite(high) & (high > low)
            low, high = np.where(finite, low, -1.0), np.where(finite, high, 1.0)  # unbounded: as they are
            # Buffers follow .to(device) but are kept out of state dicts: they derive from the space.
            self.register_buffer("center", torch.as_tensor(((high + low) / 2).astype(np.float32)), persistent=False)
            self.register_buffer("half_range_inv", torch.as_tensor((2 / (high - low)).astype(np.float32)),
                                 persistent=False)

    @property
    def features(self) -> int:
        """Width of the flattened encoding."""
        return int(np.prod(self.shape))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.one_hot:
            return nn.functional.one_hot(obs.long().reshape(-1) - self.offset, self.one_hot).float()
        x = obs.float()
        if self.scale != 1.0:
            x = x * self.scale
        if self.image:
            return x.permute(0, 3, 1, 2) if self.channels_last else x
        x = x.reshape(x.shape[0], -1)  # shape[0], not len(): a traced (exported) graph keeps its batch axis
        return (x - self.center) * self.half_range_inv if self.bounds else x


class MultiInputEncoder(nn.Module):
    """Dict or Tuple observation batches (a dict or tuple of tensors, one per part, as the collectors
    batch them) to one (N, ``features``) float tensor: every part through its own ``ObservationEncoder``
    (one-hot for Discrete, flattened and scaled for vectors, ``image_layout``'s rule for images), image
    parts then through their own Nature CNN of ``cnn_features`` units (``network="mlp"`` flattens them
    instead), all concatenated in the space's part order. A torso reads it as a flat vector:
    ``image`` is False and ``shape`` is ``(features,)``.

    Unlike ``ObservationEncoder`` it has parameters when a part is an image (the CNNs, under
    ``cnns.<part position>``); without image parts it has none.
    """

    structured = True

    def __init__(self, space: spaces.Space, network: NetworkChoice = "auto", *, bounds: bool = False,
                 name: str = "this agent", cnn_features: int = 512):
        super().__init__()
        if not isinstance(space, spaces.Dict | spaces.Tuple):
            raise IncompatibleError(f"{name} observes {space}; MultiInputEncoder reads Dict or Tuple observations")
        self.keys: list[str | int] = list(space.spaces) if isinstance(space, spaces.Dict) else list(
            range(len(space.spaces)))
        if not self.keys:
            raise IncompatibleError(f"{name} observes an empty {type(space).__name__}; it has nothing to encode")
        self.encoders = nn.ModuleDict()
        self.cnns = nn.ModuleDict()
        widths = []
        for position, key in enumerate(self.keys):
            part = space[key]
            if isinstance(part, spaces.Dict | spaces.Tuple):
                raise IncompatibleError(f"{name} observes a nested {type(space).__name__} (part {key!r} is "
                                        f"{type(part).__name__}); flatten the inner part in the environment")
            # the network choice applies per part: "cnn" is checked on the space as a whole below
            encoder = ObservationEncoder(part, "mlp" if network == "mlp" else "auto", bounds=bounds,
                                         name=f"{name} (part {key!r})")
            # modules are named by position: a Dict key may hold characters a module name may not (".")
            self.encoders[str(position)] = encoder
            if encoder.image:
                self.cnns[str(position)] = nature_cnn(encoder.shape, cnn_features)
                widths.append(cnn_features)
            else:
                widths.append(encoder.features)
        if network == "cnn" and not len(self.cnns):
            raise ConfigError(f"algo.network='cnn' needs an image part shaped (C, H, W) or (H, W, C) with H, W >= "
                              f"{MIN_IMAGE_SIDE} and C <= {MAX_IMAGE_CHANNELS}, but {name} observes {space}; use "
                              "algo.network='mlp' or 'auto'")
        self.widths = tuple(widths)
        self.image = False
        self.shape: tuple[int, ...] = (int(sum(widths)),)

    @property
    def features(self) -> int:
        """Width of the concatenated encoding."""
        return self.shape[0]

    def forward(self, obs) -> torch.Tensor:
        encoded = []
        for position, key in enumerate(self.keys):
            name = str(position)
            x = self.encoders[name](obs[key])
            encoded.append(self.cnns[name](x) if name in self.cnns else x)
        return torch.cat(encoded, dim=1)


def as_tensors(obs, device: torch.device | str = "cpu"):
    """A batch of observations as the encoders read it: an array to a tensor, a dict (tuple) of arrays
    to a dict (tuple) of tensors. Read-only arrays (shared memory, Ray's object store) are copied,
    because torch does not wrap read-only memory."""
    def one(array) -> torch.Tensor:
        if isinstance(array, np.ndarray) and not array.flags.writeable:
            array = array.copy()
        return torch.as_tensor(array, device=device)

    if isinstance(obs, dict):
        return {key: one(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(one(value) for value in obs)
    return one(obs)


# -- layers --------------------------------------------------------------------------------------------
MASKED_LOGIT = -1e8
"""What a masked action's logit becomes: its probability is 0 in float32, and unlike -inf it keeps
``p * log p`` (the entropy) at 0 instead of NaN."""


def mask_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``logits`` (N, n) with the actions ``mask`` (N, n, nonzero = allowed; ``rlf.masking``) does not
    allow set to ``MASKED_LOGIT``; rows that allow nothing are left as they are."""
    if mask is None:
        return logits
    allowed = mask > 0
    allowed = allowed | ~allowed.any(dim=1, keepdim=True)
    return logits.masked_fill(~allowed, MASKED_LOGIT)


def init_orthogonal(layer: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """Orthogonal weights, zero bias, on ``layer`` and every Linear/Conv2d inside it. Orthogonal weights
    keep activations well scaled at the start; a small head gain starts a policy near uniform."""
    for module in layer.modules():
        if isinstance(module, nn.Linear | nn.Conv2d):
            nn.init.orthogonal_(module.weight, gain)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    return layer


def mlp(in_features: int, hidden: Sequence[int], out_features: int | None = None, *,
        activation: type[nn.Module] = nn.ReLU, gain: float | None = None, out_gain: float | None = None,
        out_activation: bool = False) -> nn.Sequential:
    """Linear layers of widths ``hidden`` with ``activation`` after each, then an output layer of
    ``out_features`` (none when None: the MLP is a torso whose width is ``hidden[-1]``).

    ``gain``: orthogonal init with this gain on the hidden layers (None: torch's default init);
    ``out_gain``: the same for the output layer (defaults to ``gain``). Each layer is built and
    initialised in turn, so a seed gives the same weights as a hand-written stack would."""
    layers: list[nn.Module] = []
    width = in_features
    for size in hidden:
        layers += [_init(nn.Linear(width, size), gain), activation()]
        width = size
    if out_features is not None:
        layers.append(_init(nn.Linear(width, out_features), gain if out_gain is None else out_gain))
        if out_activation:
            layers.append(activation())
    return nn.Sequential(*layers)


def _init(layer: nn.Module, gain: float | None) -> nn.Module:
    return layer if gain is None else init_orthogonal(layer, gain)


ConvLayer = tuple[int, int, int, int]
"""(out_channels, kernel, stride, padding) of one convolution."""

NATURE_CONVS: tuple[ConvLayer, ...] = ((32, 8, 4, 0), (64, 4, 2, 0), (64, 3, 1, 0))
"""Mnih et al. 2015: 32 8x8 stride 4, 64 4x4 stride 2, 64 3x3 stride 1."""


def conv_stack(in_channels: int, convs: Sequence[ConvLayer], *, activation: type[nn.Module] = nn.ReLU,
               gain: float | None = None) -> nn.Sequential:
    """Convolutions with ``activation`` after each, then Flatten. For architectures other than the
    Nature CNN (e.g. ICM's four 3x3 stride-2 layers)."""
    layers: list[nn.Module] = []
    channels = in_channels
    for out, kernel, stride, padding in convs:
        layers += [_init(nn.Conv2d(channels, out, kernel, stride=stride, padding=padding), gain), activation()]
        channels = out
    return nn.Sequential(*layers, nn.Flatten())


def flat_size(module: nn.Module, shape: Sequence[int]) -> int:
    """Width of ``module``'s flat output for one input of ``shape`` (probed on zeros)."""
    with torch.no_grad():
        return int(module(torch.zeros(1, *shape)).shape[1])


def nature_cnn(shape: Sequence[int], features: int | None = 512, *, activation: type[nn.Module] = nn.ReLU,
               gain: float | None = None, out_activation: bool = True) -> nn.Sequential:
    """The Nature-DQN torso for (C, H, W) inputs: three convolutions, Flatten, and (unless ``features``
    is None) a dense layer of ``features`` units (followed by ``activation`` when ``out_activation``).

    ``gain``: orthogonal init with this gain on every layer (None: torch's default). With ``features``
    the result is ``Sequential(convolutions, Linear[, activation])``, else the convolutions alone
    (output width ``flat_size(result, shape)``)."""
    if min(shape[1:]) < MIN_IMAGE_SIDE:
        raise ConfigError(f"the Nature CNN needs images of at least {MIN_IMAGE_SIDE}x{MIN_IMAGE_SIDE}, got "
                          f"{tuple(shape[1:])}; use algo.network='mlp'")
    convs = conv_stack(int(shape[0]), NATURE_CONVS, activation=activation, gain=gain)
    if features is None:
        return convs
    dense: list[nn.Module] = [_init(nn.Linear(flat_size(convs, shape), features), gain)]
    if out_activation:
        dense.append(activation())
    return nn.Sequential(convs, *dense)


# -- threads -------------------------------------------------------------------------------------------
DEFAULT_TORCH_THREADS = torch.get_num_threads()
"""torch's own choice for this machine, read before any plugin changes it."""


def set_threads(threads: int | None) -> None:
    """The one place rlf sets torch's CPU thread count (a per-process setting); None or 0: leave it."""
    if threads and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


class TorchThreads:
    """torch's CPU thread count for acting and for learning; None: leave it as it is."""

    def __init__(self, acting: int | None, learning: int | None):
        self.acting = acting
        self.learning = learning

    @classmethod
    def plan(cls, configured: int, device: torch.device | str = "cpu", *, images: bool = False) -> TorchThreads:
        """The one policy: ``configured`` (> 0) for both; otherwise small MLPs on one thread (intra-op
        threads only add synchronisation: a forward pass measured ~30x slower on a busy 2-core machine),
        and CNNs act on one thread, while env workers need the cores, and learn on torch's default."""
        if torch.device(device).type != "cpu":
            return cls(None, None)
        if configured:
            return cls(configured, configured)
        return cls(1, DEFAULT_TORCH_THREADS if images else 1)

    def for_acting(self) -> None:
        set_threads(self.acting)

    def for_learning(self) -> None:
        set_threads(self.learning)

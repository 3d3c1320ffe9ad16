"""PPO's networks and the acting agent: one independent categorical policy + value network per agent id."""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf import Acting, Agent, AgentArrays, CheckpointError, ConfigError, EnvSpec, StateTree, checkpoint
from rlf.torch_utils import resolve_device, to_numpy_tree, to_torch_tree

from .config import PPOConfig

MIN_IMAGE_SIDE = 36
"""The smallest height/width the Nature-DQN convolution stack (8/4, 4/2, 3/1) leaves at least 1x1 of."""
MAX_IMAGE_CHANNELS = 16


def snapshot(state) -> StateTree:
    """A torch state dict as numpy arrays that own their memory: CPU tensors' ``.numpy()`` views would
    keep changing with training after the snapshot was taken."""
    return checkpoint.map_arrays(to_numpy_tree(state), np.copy)


def _init(layer: nn.Module, gain: float) -> nn.Module:
    # Orthogonal weights keep activations well scaled at the start; small policy-head gains make the
    # initial policy close to uniform, a unit value-head gain matches returns of order one.
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def image_layout(space: spaces.Space) -> str | None:
    """"chw" or "hwc" when ``space`` is an image the CNN can read, else None."""
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
    """Turns a raw observation batch into floats: one-hot for Discrete, /255 for uint8 pixels."""

    def __init__(self, space: spaces.Space):
        super().__init__()
        self.one_hot = int(space.n) if isinstance(space, spaces.Discrete) else 0
        self.offset = int(space.start) if isinstance(space, spaces.Discrete) else 0
        self.scale = 1.0 / 255.0 if isinstance(space, spaces.Box) and space.dtype == np.uint8 else 1.0

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.one_hot:
            return nn.functional.one_hot(obs.long().reshape(-1) - self.offset, self.one_hot).float()
        x = obs.float()
        return x * self.scale if self.scale != 1.0 else x


class ObsInput(nn.Module):
    """PPO's observation encoding (one-hot ids, pixels / 255), channels-first for images, flat otherwise.

    For extensions' own networks: with the same ``network`` setting as the policy, they see
    observations the way the policy does (``shape`` is what their first layer gets).
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


class MLPActorCritic(nn.Module):
    """Separate actor and critic MLPs: on small control tasks sharing a torso lets the value loss
    disturb the policy features."""

    def __init__(self, obs_space: spaces.Space, n_actions: int, hidden: list[int], activation: str):
        super().__init__()
        self.encoder = ObservationEncoder(obs_space)
        in_features = self.encoder.one_hot or int(np.prod(obs_space.shape))
        act = nn.Tanh if activation == "tanh" else nn.ReLU
        self.actor = self._mlp(in_features, hidden, act, n_actions, 0.01)
        self.critic = self._mlp(in_features, hidden, act, 1, 1.0)

    @staticmethod
    def _mlp(in_features: int, hidden: list[int], act: type[nn.Module], out: int, head_gain: float) -> nn.Sequential:
        layers: list[nn.Module] = []
        for width in hidden:
            layers += [_init(nn.Linear(in_features, width), math.sqrt(2)), act()]
            in_features = width
        layers.append(_init(nn.Linear(in_features, out), head_gain))
        return nn.Sequential(*layers)

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.encoder(obs)
        return x.reshape(x.shape[0], -1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self._features(obs)
        return self.actor(x), self.critic(x).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self._features(obs)).squeeze(-1)


class CNNActorCritic(nn.Module):
    """The Nature-DQN convolution stack with a shared torso and separate policy and value heads."""

    def __init__(self, obs_space: spaces.Box, n_actions: int, features: int, layout: str):
        super().__init__()
        self.encoder = ObservationEncoder(obs_space)
        self.channels_last = layout == "hwc"
        shape = obs_space.shape if layout == "chw" else (obs_space.shape[2], *obs_space.shape[:2])
        gain = math.sqrt(2)
        convs = nn.Sequential(
            _init(nn.Conv2d(shape[0], 32, 8, stride=4), gain), nn.ReLU(),
            _init(nn.Conv2d(32, 64, 4, stride=2), gain), nn.ReLU(),
            _init(nn.Conv2d(64, 64, 3, stride=1), gain), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = convs(torch.zeros(1, *shape)).shape[1]
        self.torso = nn.Sequential(convs, _init(nn.Linear(flat, features), gain), nn.ReLU())
        self.policy_head = _init(nn.Linear(features, n_actions), 0.01)
        self.value_head = _init(nn.Linear(features, 1), 1.0)

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.encoder(obs)
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return self.torso(x)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self._features(obs)
        return self.policy_head(h), self.value_head(h).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_head(self._features(obs)).squeeze(-1)


def build_network(agent_id: str, obs_space: spaces.Space, action_space: spaces.Space,
                  config: PPOConfig) -> nn.Module:
    if not isinstance(action_space, spaces.Discrete):
        raise ConfigError(f"PPO needs Discrete actions, but agent {agent_id!r} has {action_space}; "
                          "choose an environment with discrete actions")
    if not isinstance(obs_space, spaces.Box | spaces.Discrete):
        raise ConfigError(f"PPO reads Box or Discrete observations, but agent {agent_id!r} has {obs_space}; "
                          "flatten the observation in the environment (e.g. gymnasium FlattenObservation)")
    layout = image_layout(obs_space)
    use_cnn = config.network == "cnn" or (config.network == "auto" and layout is not None)
    if use_cnn:
        if layout is None:
            raise ConfigError(f"algo.network='cnn' needs image observations shaped (C, H, W) or (H, W, C) with "
                              f"H, W >= {MIN_IMAGE_SIDE} and C <= {MAX_IMAGE_CHANNELS}, but agent {agent_id!r} "
                              f"has {obs_space}; use algo.network='mlp' or 'auto'")
        return CNNActorCritic(obs_space, int(action_space.n), config.cnn_features, layout)
    return MLPActorCritic(obs_space, int(action_space.n), config.hidden_sizes, config.activation)


DEFAULT_TORCH_THREADS = torch.get_num_threads()
"""torch's own choice for this machine, read before any agent changes it."""


class TorchThreads:
    """torch's CPU thread count (a per-process setting) for acting and for learning; None: leave it."""

    def __init__(self, acting: int | None, learning: int | None):
        self.acting = acting
        self.learning = learning

    def for_acting(self) -> None:
        self._use(self.acting)

    def for_learning(self) -> None:
        self._use(self.learning)

    @staticmethod
    def _use(threads: int | None) -> None:
        if threads and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)


class PPOAgent(Agent):
    """Samples from a categorical policy (``explore=True``) or takes its argmax (``explore=False``).

    Every agent id gets its own network, built from the spaces of that id; nothing is shared, so a
    multi-agent env is independent learning. All envs of the vector go through one forward pass.
    """

    rows_independent = True  # a pure function of observation, weights and the sampling stream

    def __init__(self, spec: EnvSpec, config: PPOConfig, seed: int, device: str = "cpu"):
        self.spec = spec
        self.config = config
        self.device = resolve_device(device)
        # Build on the CPU under a forked RNG, so the weights depend on the seed alone and the
        # caller's global torch RNG stream is left untouched.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.networks: dict[str, nn.Module] = {
                agent_id: build_network(agent_id, spec.observation_spaces[agent_id],
                                        spec.action_spaces[agent_id], config)
                for agent_id in spec.agent_ids}
        for network in self.networks.values():
            network.to(self.device)
        self.threads = self._plan_threads()
        self.threads.for_acting()
        self.action_offsets = {agent_id: int(spec.action_spaces[agent_id].start) for agent_id in spec.agent_ids}
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(seed)

    def _plan_threads(self) -> TorchThreads:
        if self.device.type != "cpu":
            return TorchThreads(None, None)
        if self.config.torch_threads:
            return TorchThreads(self.config.torch_threads, self.config.torch_threads)
        if all(isinstance(n, MLPActorCritic) for n in self.networks.values()):
            # Small MLPs gain nothing from intra-op threads, and on a busy machine the threads'
            # synchronisation made each forward pass ~30x slower (measured: 3.2 ms vs 0.1 ms).
            return TorchThreads(1, 1)
        # A CNN acts on a batch of a few images while the env workers need every core: a second
        # thread there cost Mario collection a third of its speed (benchmarks/ppo_mario.py). The
        # update, with the envs idle, gets torch's default.
        return TorchThreads(1, DEFAULT_TORCH_THREADS)

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        array = np.asarray(array)
        if not array.flags.writeable:  # torch refuses to wrap read-only memory without a copy
            array = array.copy()
        return torch.as_tensor(array, device=self.device)

    @torch.inference_mode()
    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        self.threads.for_acting()
        actions: AgentArrays = {}
        extras: dict[str, dict[str, np.ndarray]] = {}
        for agent_id, batch in obs.items():
            logits, value = self.networks[agent_id](self.tensor(batch))
            log_probs = torch.log_softmax(logits, dim=-1)
            if explore:
                chosen = torch.multinomial(log_probs.exp(), 1, generator=self.generator).squeeze(1)
            else:
                chosen = logits.argmax(dim=-1)
            log_prob = log_probs.gather(1, chosen.unsqueeze(1)).squeeze(1)
            actions[agent_id] = chosen.cpu().numpy() + self.action_offsets[agent_id]
            extras[agent_id] = {"log_prob": log_prob.cpu().numpy(), "value": value.cpu().numpy()}
        return Acting(actions, extras)

    @torch.inference_mode()
    def value(self, obs: AgentArrays) -> AgentArrays:
        self.threads.for_acting()
        return {agent_id: self.networks[agent_id].value(self.tensor(batch)).cpu().numpy()
                for agent_id, batch in obs.items()}

    def state_dict(self) -> StateTree:
        return {"networks": {agent_id: snapshot(network.state_dict())
                             for agent_id, network in self.networks.items()},
                "generator": {"device": self.device.type, "state": self.generator.get_state().numpy()}}

    def load_state_dict(self, state: StateTree) -> None:
        missing = set(self.networks) - set(state["networks"])
        if missing:
            raise CheckpointError(f"checkpoint has no PPO network for agent(s) {sorted(missing)}; "
                              "it was trained on a different environment")
        for agent_id, network in self.networks.items():
            network.load_state_dict(to_torch_tree(state["networks"][agent_id], self.device))
        generator = state["generator"]
        # CPU and CUDA generators keep differently shaped states: a stream saved on one device type
        # cannot continue on another, so there the seeded stream is kept.
        if generator["device"] == self.device.type:
            self.generator.set_state(torch.as_tensor(np.asarray(generator["state"], dtype=np.uint8)))

"""SAC's networks and the acting agent: per agent id a tanh-squashed Gaussian policy; the twin
Q-networks belong to the learner (acting never needs them)."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf import (
    Acting,
    Agent,
    AgentArrays,
    CheckpointError,
    EnvSpec,
    IncompatibleError,
    PolicyExport,
    StateTree,
)
from rlf.nn import ObservationEncoder, TorchThreads, mlp
from rlf.nn.torch_utils import to_numpy_tree, to_torch_tree

from .config import SACConfig

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""Bounds of the policy's log standard deviation (as CleanRL): wide enough to explore, narrow enough
that the log-probability of the squashed sample stays finite."""
SQUASH_EPS = 1e-6
"""Added inside log(1 - tanh(u)^2) so actions at the bounds keep a finite log-probability."""


def action_bounds(agent_id: str, space: spaces.Space) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of a Box action space; SAC squashes into them, so both must be finite."""
    if not isinstance(space, spaces.Box):
        raise IncompatibleError(f"SAC needs continuous (Box) actions, but agent {agent_id!r} has {space}; "
                                "choose an environment with Box actions (e.g. gym:Pendulum-v1) or use dqn/ppo")
    low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        raise IncompatibleError(f"SAC squashes actions into their bounds, but agent {agent_id!r} has unbounded "
                                f"actions {space}; wrap the env with gymnasium.wrappers.ClipAction and finite bounds")
    return low, high


class Actor(nn.Module):
    """obs -> (mean, log_std) of a Gaussian over pre-squash actions; tanh and the bounds map it into the Box."""

    def __init__(self, obs_space: spaces.Space, action_space: spaces.Box, hidden: list[int], name: str):
        super().__init__()
        low, high = action_bounds(name, action_space)
        self.encoder = ObservationEncoder(obs_space, "mlp", name=f"agent {name!r}")
        self.action_shape = tuple(action_space.shape)
        dim = int(np.prod(self.action_shape))
        self.torso = mlp(self.encoder.features, hidden)
        self.mean = nn.Linear(hidden[-1], dim)
        self.log_std = nn.Linear(hidden[-1], dim)
        # Derived from the space, so kept out of the state dict.
        self.register_buffer("scale", torch.as_tensor((high - low).reshape(-1) / 2), persistent=False)
        self.register_buffer("center", torch.as_tensor((high + low).reshape(-1) / 2), persistent=False)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(self.encoder(obs))
        # tanh onto [MIN, MAX] instead of a hard clamp keeps a gradient at the bounds
        log_std = torch.tanh(self.log_std(h))
        return self.mean(h), LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)

    def sample(self, obs: torch.Tensor, generator: torch.Generator | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action in the Box (flat, (N, dim)) and its log-probability (N,)."""
        mean, log_std = self(obs)
        std = log_std.exp()
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        u = mean + std * noise
        squashed = torch.tanh(u)
        # Gaussian log-density of u, minus log|d action / d u| of the tanh and the scale
        log_prob = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=1)
        log_prob = log_prob - torch.log(self.scale * (1 - squashed.pow(2)) + SQUASH_EPS).sum(dim=1)
        return squashed * self.scale + self.center, log_prob

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        mean, _ = self(obs)
        return torch.tanh(mean) * self.scale + self.center


class TwinQ(nn.Module):
    """Two independent Q(s, a) MLPs; the smaller estimate fights Q-learning's overestimation."""

    def __init__(self, obs_space: spaces.Space, action_space: spaces.Box, hidden: list[int], name: str):
        super().__init__()
        self.encoder = ObservationEncoder(obs_space, "mlp", name=f"agent {name!r}")
        width = self.encoder.features + int(np.prod(action_space.shape))
        self.q1 = mlp(width, hidden, 1)
        self.q2 = mlp(width, hidden, 1)

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([self.encoder(obs), actions.reshape(len(actions), -1)], dim=1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


class SACAgent(Agent):
    """Samples from each agent's squashed Gaussian (``explore=True``) or takes its mean (``explore=False``).
    For the first ``learning_starts`` env steps it acts uniformly at random, as SB3 and CleanRL do, so
    the replay starts with diverse data rather than one untrained policy's."""

    def __init__(self, spec: EnvSpec, config: SACConfig, seed: int, device: torch.device):
        self.spec = spec
        self.config = config
        self.device = device
        # Built under a forked RNG: the weights depend on the seed alone, the caller's stream is untouched.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.actors: dict[str, Actor] = {
                agent_id: Actor(spec.observation_spaces[agent_id], spec.action_spaces[agent_id],
                                config.hidden_sizes, agent_id).to(device)
                for agent_id in spec.agent_ids}
        self.threads = TorchThreads.plan(config.torch_threads, device)
        self.threads.for_acting()
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        array = np.asarray(array)
        if not array.flags.writeable:  # torch will not wrap read-only memory
            array = array.copy()
        return torch.as_tensor(array, device=self.device)

    @property
    def warming_up(self) -> bool:
        return self.env_steps < self.config.learning_starts

    @torch.inference_mode()
    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        self.threads.for_acting()
        actions: AgentArrays = {}
        for agent_id, batch in obs.items():
            actor = self.actors[agent_id]
            if explore and self.warming_up:
                low, high = action_bounds(agent_id, self.spec.action_spaces[agent_id])
                chosen = self.rng.uniform(low, high, size=(len(batch), *actor.action_shape)).astype(np.float32)
            else:
                x = self.tensor(batch)
                flat = actor.sample(x, self.generator)[0] if explore else actor.greedy(x)
                chosen = flat.cpu().numpy().reshape(len(batch), *actor.action_shape)
            actions[agent_id] = chosen.astype(self.spec.action_spaces[agent_id].dtype, copy=False)
        return Acting(actions)

    def export_policy(self, agent_id: str) -> PolicyExport:
        # forward() is (mean, log_std) before tanh; the exported graph squashes into the same bounds
        return PolicyExport(copy.deepcopy(self.actors[agent_id]).cpu(), "squashed_gaussian")

    def on_progress(self, env_steps: int, episodes_ended: int) -> None:
        self.env_steps += env_steps

    def weights(self) -> StateTree:
        """The policies and the step counter, without the random streams: what actor processes load."""
        return {"actors": {a: to_numpy_tree(actor.state_dict()) for a, actor in self.actors.items()},
                "env_steps": self.env_steps}

    def state_dict(self) -> StateTree:
        return {**self.weights(), "rng": self.rng.bit_generator.state,
                "generator": {"device": self.device.type, "state": self.generator.get_state().numpy()}}

    def load_state_dict(self, state: StateTree) -> None:
        missing = set(self.actors) - set(state["actors"])
        if missing:
            raise CheckpointError(f"checkpoint has no SAC policy for agent(s) {sorted(missing)}; "
                                  "it was trained on a different environment")
        try:
            for agent_id, actor in self.actors.items():
                actor.load_state_dict(to_torch_tree(state["actors"][agent_id], self.device))
        except RuntimeError as exc:
            raise CheckpointError(f"this checkpoint does not fit a SAC policy built with the current settings "
                                  f"({str(exc).splitlines()[0]}); load it with the hidden_sizes and environment "
                                  "it was trained with") from None
        self.env_steps = int(state["env_steps"])
        if "rng" in state:  # weights pushed to actor processes leave the streams out: each keeps its own
            self.rng.bit_generator.state = state["rng"]
        generator = state.get("generator")
        # CPU and CUDA generators keep differently shaped states; across device types the seeded stream stays.
        if generator is not None and generator["device"] == self.device.type:
            self.generator.set_state(torch.as_tensor(np.asarray(generator["state"], dtype=np.uint8)))

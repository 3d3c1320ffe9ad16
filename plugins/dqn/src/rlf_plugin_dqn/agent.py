"""The acting side of DQN: one online Q-network per agent id and epsilon-greedy action choice."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from rlf import (
    Acting,
    Agent,
    AgentArrays,
    ConfigError,
    EnvSpec,
    EpsilonSchedule,
    PolicyExport,
    StateTree,
    masking,
    observations,
)
from rlf.nn import MultiInputEncoder, NumpyMLP, TorchThreads, as_tensors
from rlf.nn.torch_utils import to_numpy_tree, to_torch_tree

from .config import DQNConfig
from .model import ObservationLayout, QNetwork, build_q_network, observation_layout


def encoder_state_dim(spec: EnvSpec) -> int | None:
    """The ``state_dim`` an env's observation encoder promises, if the env has one (predator-prey)."""
    encoder = spec.metadata.get("encoder")
    if encoder is None:
        return None
    dim = getattr(encoder, "state_dim", None)
    return int(dim) if dim is not None else None


def check_encoded(batch: np.ndarray, state_dim: int, agent: str, what: str) -> None:
    if batch.ndim != 2 or batch.shape[1] != state_dim:
        raise ValueError(f"{what} of agent {agent!r} has shape {batch.shape[1:]}, but the env's encoder "
                         f"promises state_dim={state_dim}; the observations do not match this env")


def numpy_actable(net: QNetwork) -> bool:
    """A plain (not dueling) MLP Q-network over float vectors: what ``rlf.nn.NumpyMLP`` can act with."""
    torso, encoder = net.torso, net.torso.encoder
    if isinstance(encoder, MultiInputEncoder):
        return False
    plain = not encoder.one_hot and not encoder.image and not encoder.bounds and encoder.scale == 1.0
    return plain and net.value is None and NumpyMLP.supports([*torso.body, net.advantage])


class DQNAgent(Agent):
    def __init__(self, spec: EnvSpec, config: DQNConfig, seed: int, device: torch.device):
        self.agent_ids = spec.agent_ids
        self.device = device
        self.epsilon = EpsilonSchedule(config.exploration)
        self.rng = np.random.default_rng(seed)
        self.layouts: dict[str, ObservationLayout] = {}
        self.n_actions: dict[str, int] = {}
        self.networks: dict[str, QNetwork] = {}
        self.masked: set[str] = set()
        """Agent ids whose observations carry an action mask (rlf.masking): never a forbidden action."""
        state_dim = encoder_state_dim(spec)
        # forked so that building an agent does not move the global torch stream other code relies on
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for agent in spec.agent_ids:
                obs_space, action_space = spec.observation_spaces[agent], spec.action_spaces[agent]
                if not isinstance(action_space, spaces.Discrete):
                    raise ConfigError(f"DQN needs discrete actions, agent {agent!r} has {action_space}; "
                                      "choose an env with discrete actions")
                layout = observation_layout(obs_space, config.network, name=f"DQN's agent {agent!r}")
                if state_dim is not None and (layout.image or layout.structured
                                              or int(np.prod(layout.shape)) != state_dim):
                    raise ValueError(f"agent {agent!r} observes shape {layout.shape}, but the env's encoder "
                                     f"promises state_dim={state_dim}")
                if masking.has_mask(obs_space, action_space, f"DQN's agent {agent!r}"):
                    self.masked.add(agent)
                self.layouts[agent] = layout
                self.n_actions[agent] = int(action_space.n)
                self.networks[agent] = build_q_network(obs_space, int(action_space.n), config,
                                                       f"DQN's agent {agent!r}").to(device)
        # an MLP update is a few small matmuls: extra threads made each ~20x slower (82 ms vs 4.4 ms)
        self.threads = TorchThreads.plan(config.torch_threads, device,
                                         images=any(layout.image for layout in self.layouts.values()))
        self.threads.for_acting()
        # algo.backend="fast": small MLPs on the CPU act in numpy (rlf.nn.NumpyMLP): torch's per-call
        # overhead on one observation cost more than the 256x256 network's arithmetic
        self.numpy_q = {agent: NumpyMLP([*net.torso.body, net.advantage]) for agent, net in self.networks.items()
                        if config.backend == "fast" and numpy_actable(net)}

    def greedy(self, agent: str, obs: np.ndarray) -> np.ndarray:
        fast = self.numpy_q.get(agent)
        if fast is not None:
            return fast(obs.reshape(len(obs), -1)).argmax(axis=1)
        if agent in self.masked:
            return masking.masked_argmax(self.q_values(agent, obs).cpu().numpy(), masking.action_mask(obs))
        return self.q_values(agent, obs).argmax(dim=1).cpu().numpy()

    @torch.no_grad()
    def q_values(self, agent: str, obs: Any) -> torch.Tensor:
        self.threads.for_acting()
        return self.networks[agent](as_tensors(obs, self.device))

    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        actions: AgentArrays = {}
        for agent, batch in obs.items():
            if not explore:
                actions[agent] = self.greedy(agent, batch)
                continue
            # both draws happen every step so the stream, and with it a seeded run, does not depend
            # on how many envs happened to explore
            n = observations.rows(batch)
            explore_mask = self.rng.random(n) < self.epsilon.value
            if agent in self.masked:
                random_actions = masking.sample_allowed(self.rng, masking.action_mask(batch))
            else:
                random_actions = self.rng.integers(0, self.n_actions[agent], size=n)
            if explore_mask.all():
                actions[agent] = random_actions
                continue
            actions[agent] = np.where(explore_mask, random_actions, self.greedy(agent, batch))
        return Acting(actions)

    def export_policy(self, agent_id: str) -> PolicyExport:
        # the greedy action is the one evaluated; epsilon-greedy exploration is the deployer's choice
        return PolicyExport(copy.deepcopy(self.networks[agent_id]).cpu(), "q_values")

    def on_progress(self, env_steps: int, episodes_ended: int) -> None:
        self.epsilon.advance(env_steps, episodes_ended)

    def metrics(self) -> dict[str, float]:
        return {"epsilon": float(self.epsilon.value)}

    def weights(self) -> StateTree:
        """Networks and exploration, without the action RNG: what actor copies load."""
        return {"networks": {a: to_numpy_tree(net.state_dict()) for a, net in self.networks.items()},
                "epsilon": self.epsilon.state_dict()}

    def state_dict(self) -> StateTree:
        return {**self.weights(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: StateTree) -> None:
        networks: dict[str, Any] = state["networks"]
        missing = set(self.networks) - set(networks)
        if missing:
            raise ValueError(f"saved DQN state has no network for agent(s) {sorted(missing)}")
        for agent, net in self.networks.items():
            net.load_state_dict(to_torch_tree(networks[agent], self.device))
            if agent in self.numpy_q:
                self.numpy_q[agent].refresh()
        self.epsilon.load_state_dict(state["epsilon"])
        if "rng" in state:  # weights pushed to actors leave it out, so each actor keeps its own stream
            self.rng.bit_generator.state = state["rng"]

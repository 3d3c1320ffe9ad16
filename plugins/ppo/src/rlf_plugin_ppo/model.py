"""PPO's networks and the acting agent: one independent categorical policy + value network per agent id."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf import Acting, Agent, AgentArrays, CheckpointError, ConfigError, EnvSpec, PolicyExport, StateTree
from rlf.nn import NumpyMLP, ObservationEncoder, TorchThreads, init_orthogonal, mlp, nature_cnn
from rlf.nn.torch_utils import resolve_device, to_numpy_tree, to_torch_tree
from rlf.storage import checkpoint

from .config import PPOConfig


def snapshot(state) -> StateTree:
    """A torch state dict as numpy arrays that own their memory: CPU tensors' ``.numpy()`` views would
    keep changing with training after the snapshot was taken."""
    return checkpoint.map_arrays(to_numpy_tree(state), np.copy)


ObsInput = ObservationEncoder
"""PPO's former name for ``rlf.nn.ObservationEncoder``, kept for extensions that import it from here."""


class MLPActorCritic(nn.Module):
    """Separate actor and critic MLPs: on small control tasks sharing a torso lets the value loss
    disturb the policy features."""

    def __init__(self, encoder: ObservationEncoder, n_actions: int, hidden: list[int], activation: str):
        super().__init__()
        self.encoder = encoder
        act = nn.Tanh if activation == "tanh" else nn.ReLU
        # small policy-head gain: the initial policy is close to uniform; unit value gain: returns of order one
        self.actor = mlp(encoder.features, hidden, n_actions, activation=act, gain=math.sqrt(2), out_gain=0.01)
        self.critic = mlp(encoder.features, hidden, 1, activation=act, gain=math.sqrt(2), out_gain=1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.encoder(obs)
        return self.actor(x), self.critic(x).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.encoder(obs)).squeeze(-1)


class NumpyActing:
    """An ``MLPActorCritic``'s actor and critic as ``rlf.nn.NumpyMLP``: acting without torch's per-call
    overhead, on the CPU, for plain float Box observations (no one-hot, bounds mapping or pixel scaling)."""

    def __init__(self, network: MLPActorCritic):
        self.actor = NumpyMLP(network.actor)
        self.critic = NumpyMLP(network.critic)

    @staticmethod
    def supports(network: nn.Module, device: torch.device) -> bool:
        if device.type != "cpu" or not isinstance(network, MLPActorCritic):
            return False
        encoder = network.encoder
        plain = not encoder.one_hot and not encoder.image and not encoder.bounds and encoder.scale == 1.0
        return plain and NumpyMLP.supports(network.actor) and NumpyMLP.supports(network.critic)

    def refresh(self) -> None:
        self.actor.refresh()
        self.critic.refresh()

    @staticmethod
    def inputs(obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)

    def logits_and_values(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = self.inputs(obs)
        return self.actor(x), self.critic(x)[:, 0]

    def values(self, obs: np.ndarray) -> np.ndarray:
        return self.critic(self.inputs(obs))[:, 0]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


class CNNActorCritic(nn.Module):
    """The Nature-DQN convolution stack with a shared torso and separate policy and value heads."""

    def __init__(self, encoder: ObservationEncoder, n_actions: int, features: int):
        super().__init__()
        self.encoder = encoder
        self.torso = nature_cnn(encoder.shape, features, gain=math.sqrt(2))
        self.policy_head = init_orthogonal(nn.Linear(features, n_actions), 0.01)
        self.value_head = init_orthogonal(nn.Linear(features, 1), 1.0)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(self.encoder(obs))
        return self.policy_head(h), self.value_head(h).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.torso(self.encoder(obs))).squeeze(-1)


class PolicyLogits(nn.Module):
    """An actor-critic network's logits alone: what ``rlf export --format onnx`` traces."""

    def __init__(self, network: nn.Module):
        super().__init__()
        self.network = network

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.network(obs)[0]


def build_network(agent_id: str, obs_space: spaces.Space, action_space: spaces.Space,
                  config: PPOConfig) -> nn.Module:
    if not isinstance(action_space, spaces.Discrete):
        raise ConfigError(f"PPO needs Discrete actions, but agent {agent_id!r} has {action_space}; "
                          "choose an environment with discrete actions")
    encoder = ObservationEncoder(obs_space, config.network, name=f"PPO's agent {agent_id!r}")
    if encoder.image:
        return CNNActorCritic(encoder, int(action_space.n), config.cnn_features)
    return MLPActorCritic(encoder, int(action_space.n), config.hidden_sizes, config.activation)


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
        # algo.backend="numpy" acts through numpy views of the same weights (numpy_update.py says why)
        self.numpy_acting = {agent_id: NumpyActing(network) for agent_id, network in self.networks.items()
                             if config.backend == "numpy" and NumpyActing.supports(network, self.device)}

    def _plan_threads(self) -> TorchThreads:
        # For CNNs acting on one thread matters: a second one cost Mario collection a third of its
        # speed (benchmarks/ppo_mario.py), as the env workers need every core.
        images = any(isinstance(n, CNNActorCritic) for n in self.networks.values())
        return TorchThreads.plan(self.config.torch_threads, self.device, images=images)

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        array = np.asarray(array)
        if not array.flags.writeable:  # torch refuses to wrap read-only memory without a copy
            array = array.copy()
        return torch.as_tensor(array, device=self.device)

    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        if all(agent_id in self.numpy_acting for agent_id in obs):
            return self._act_numpy(obs, explore)
        return self._act_torch(obs, explore)

    def export_policy(self, agent_id: str) -> PolicyExport:
        return PolicyExport(PolicyLogits(copy.deepcopy(self.networks[agent_id])).cpu(), "categorical")

    def _act_numpy(self, obs: AgentArrays, explore: bool) -> Acting:
        """Categorical sampling by inverse CDF on one uniform per row from the agent's torch generator:
        the same distribution as ``torch.multinomial``, which alone cost ~23 us per call."""
        actions: AgentArrays = {}
        extras: dict[str, dict[str, np.ndarray]] = {}
        for agent_id, batch in obs.items():
            fast = self.numpy_acting[agent_id]
            logits, value = fast.logits_and_values(batch)
            log_probs = log_softmax(logits)
            count, n_actions = logits.shape
            if explore:
                uniform = torch.rand(count, 1, generator=self.generator).numpy()
                cumulative = np.exp(log_probs, dtype=np.float64).cumsum(axis=1)
                # rounding can leave the last cumulative value a hair under 1: never step past the end
                chosen = np.minimum((cumulative < uniform).sum(axis=1), n_actions - 1)
            else:
                chosen = logits.argmax(axis=1)
            # plain fancy indexing: np.take_along_axis costs several times more on one row
            log_prob = log_probs[np.arange(count), chosen]
            actions[agent_id] = chosen.astype(np.int64) + self.action_offsets[agent_id]
            extras[agent_id] = {"log_prob": log_prob, "value": value}
        return Acting(actions, extras)

    @torch.inference_mode()
    def _act_torch(self, obs: AgentArrays, explore: bool) -> Acting:
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

    def value(self, obs: AgentArrays) -> AgentArrays:
        if all(agent_id in self.numpy_acting for agent_id in obs):
            return {agent_id: self.numpy_acting[agent_id].values(batch) for agent_id, batch in obs.items()}
        return self._value_torch(obs)

    @torch.inference_mode()
    def _value_torch(self, obs: AgentArrays) -> AgentArrays:
        self.threads.for_acting()
        result = {}
        for agent_id, batch in obs.items():
            fast = self.numpy_acting.get(agent_id)
            result[agent_id] = (fast.values(batch) if fast is not None
                                else self.networks[agent_id].value(self.tensor(batch)).cpu().numpy())
        return result

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
            if agent_id in self.numpy_acting:
                self.numpy_acting[agent_id].refresh()
        generator = state.get("generator")
        if generator is None:  # the learner's weights() (an acting copy's refresh): keep this agent's own stream
            return
        # CPU and CUDA generators keep differently shaped states: a stream saved on one device type
        # cannot continue on another, so there the seeded stream is kept.
        if generator["device"] == self.device.type:
            self.generator.set_state(torch.as_tensor(np.asarray(generator["state"], dtype=np.uint8)))

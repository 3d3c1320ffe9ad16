"""PPO's networks and the acting agent: one independent categorical policy + value network per agent id."""

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
    ConfigError,
    EnvSpec,
    PolicyExport,
    StateTree,
    checkpoint,
    observations,
)
from rlf.masking import ACTION_MASK_KEY, has_mask
from rlf.nn import (
    MultiInputEncoder,
    NumpyMLP,
    ObservationEncoder,
    TorchThreads,
    as_tensors,
    init_orthogonal,
    mask_logits,
    mlp,
    nature_cnn,
)
from rlf.nn.torch_utils import resolve_device, to_numpy_tree, to_torch_tree

from .config import PPOConfig


def snapshot(state) -> StateTree:
    """A torch state dict as numpy arrays that own their memory: CPU tensors' ``.numpy()`` views would
    keep changing with training after the snapshot was taken."""
    return checkpoint.map_arrays(to_numpy_tree(state), np.copy)


ObsInput = ObservationEncoder
"""PPO's former name for ``rlf.nn.ObservationEncoder``, kept for extensions that import it from here."""


class ObservationStatistics(nn.Module):
    """Standardises observations with running statistics the learner updates between rollouts
    (``algo.normalize_obs``), clipped to +-``clip``: buffers of the network, so a checkpoint, an acting
    copy and an exported policy all carry the statistics the policy was trained with."""

    def __init__(self, features: int, clip: float):
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", torch.zeros(features))
        self.register_buffer("inv_std", torch.ones(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) * self.inv_std).clamp(-self.clip, self.clip)

    def set(self, mean: np.ndarray, std: np.ndarray) -> None:
        with torch.no_grad():
            self.mean.copy_(torch.as_tensor(mean.reshape(-1), dtype=torch.float32))
            self.inv_std.copy_(torch.as_tensor(1.0 / std.reshape(-1), dtype=torch.float32))


class MLPActorCritic(nn.Module):
    """Separate actor and critic MLPs: on small control tasks sharing a torso lets the value loss
    disturb the policy features."""

    def __init__(self, encoder: ObservationEncoder, n_actions: int, hidden: list[int], activation: str,
                 ortho_init: bool = True, obs_statistics: ObservationStatistics | None = None):
        super().__init__()
        self.encoder = encoder
        act = nn.Tanh if activation == "tanh" else nn.ReLU
        # small policy-head gain: the initial policy is close to uniform; unit value gain: returns of order one
        gain, policy_gain, value_gain = (math.sqrt(2), 0.01, 1.0) if ortho_init else (None, None, None)
        self.actor = mlp(encoder.features, hidden, n_actions, activation=act, gain=gain, out_gain=policy_gain)
        self.critic = mlp(encoder.features, hidden, 1, activation=act, gain=gain, out_gain=value_gain)
        if obs_statistics is not None:  # only then: a network without it keeps the state dict it always had
            self.obs_statistics = obs_statistics

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.encoder(obs)
        statistics = getattr(self, "obs_statistics", None)
        return x if statistics is None else statistics(x)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.features(obs)
        return self.actor(x), self.critic(x).squeeze(-1)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.features(obs)).squeeze(-1)


class GaussianActorCritic(MLPActorCritic):
    """A diagonal Gaussian policy for Box actions: the actor MLP gives the mean, one learned log standard
    deviation per action dimension is shared by every state (as in the PPO paper's MuJoCo runs and
    Stable-Baselines3's default), the critic is a separate MLP. ``forward`` gives (mean, value);
    ``log_std`` is the parameter."""

    def __init__(self, encoder: ObservationEncoder, action_dim: int, hidden: list[int], activation: str,
                 log_std_init: float, ortho_init: bool = True, obs_statistics: ObservationStatistics | None = None):
        super().__init__(encoder, action_dim, hidden, activation, ortho_init, obs_statistics)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))


def gaussian_log_prob(mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """Log density of ``actions`` (B, D) under the diagonal Gaussian, summed over the D dimensions."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Entropy of the diagonal Gaussian (the same for every state: the std does not depend on it)."""
    return (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(dim=-1)


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
        if (isinstance(network, GaussianActorCritic) or hasattr(network, "obs_statistics")
                or isinstance(encoder, MultiInputEncoder)):
            return False
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


class PolicyGaussian(nn.Module):
    """A Gaussian actor-critic's (mean, log_std), each (N, D): what ``rlf export --format onnx`` traces."""

    def __init__(self, network: GaussianActorCritic):
        super().__init__()
        self.network = network

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.network(obs)[0]
        return mean, self.network.log_std.expand_as(mean)


def build_network(agent_id: str, obs_space: spaces.Space, action_space: spaces.Space,
                  config: PPOConfig) -> nn.Module:
    name = f"PPO's agent {agent_id!r}"
    continuous = isinstance(action_space, spaces.Box)
    if not (continuous or isinstance(action_space, spaces.Discrete)):
        raise ConfigError(f"PPO needs Discrete or Box actions, but agent {agent_id!r} has {action_space}; "
                          "choose an environment with such actions")
    if continuous and len(action_space.shape) != 1:
        raise ConfigError(f"PPO's Gaussian policy needs a flat Box action space (shape (D,)), but agent "
                          f"{agent_id!r} has {action_space}; flatten the actions in the environment")
    # Dict and Tuple spaces: a MultiInputEncoder (a CNN per image part), read by the MLP branch below
    encoder = ObservationEncoder(obs_space, config.network, name=name, cnn_features=config.cnn_features)
    statistics = None
    if config.normalize_obs:
        if isinstance(encoder, MultiInputEncoder) or encoder.image or encoder.one_hot:
            raise ConfigError(f"algo.normalize_obs standardises vector observations, but {name} observes "
                              f"{obs_space}; set algo.normalize_obs=false")
        statistics = ObservationStatistics(encoder.features, config.normalize_clip)
    if config.memory != "none":
        from .recurrent import RecurrentActorCritic

        out = int(action_space.shape[0]) if continuous else int(action_space.n)
        return RecurrentActorCritic(encoder, out, config, gaussian=continuous, obs_statistics=statistics)
    if encoder.image:
        if continuous:
            raise ConfigError(f"PPO's Gaussian policy is an MLP, but {name} observes images ({obs_space}); "
                              "set algo.network='mlp' or choose an environment with vector observations")
        return CNNActorCritic(encoder, int(action_space.n), config.cnn_features)
    if continuous:
        return GaussianActorCritic(encoder, int(action_space.shape[0]), config.hidden_sizes, config.activation,
                                   config.log_std_init, config.ortho_init, statistics)
    return MLPActorCritic(encoder, int(action_space.n), config.hidden_sizes, config.activation,
                          config.ortho_init, statistics)


class PPOAgent(Agent):
    """Samples from a categorical policy (``explore=True``) or takes its argmax (``explore=False``); for
    Box actions, samples from a diagonal Gaussian or takes its mean, clipped to the action space's
    bounds for the env. The unclipped sample goes to the rollout as ``extras["raw_action"]``: the
    log-probability belongs to it, and the update must score the action that was drawn.

    Every agent id gets its own network, built from the spaces of that id; nothing is shared, so a
    multi-agent env is independent learning. All envs of the vector go through one forward pass.
    """

    rows_independent = True  # a pure function of observation, weights and the sampling stream

    def __init__(self, spec: EnvSpec, config: PPOConfig, seed: int, device: str = "cpu"):
        self.spec = spec
        self.config = config
        self.recurrent = config.memory != "none"
        self.rows_independent = not self.recurrent  # with memory, a row depends on the env's past too
        self.memory: dict[str, torch.Tensor] = {}
        """algo.memory: per agent id, one state row per env (recurrent.py states the contract)."""
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
        self.bounds = {agent_id: (np.asarray(space.low, dtype=np.float32), np.asarray(space.high, dtype=np.float32),
                                  space.dtype)
                       for agent_id, space in spec.action_spaces.items() if isinstance(space, spaces.Box)}
        self.action_offsets = {agent_id: 0 if agent_id in self.bounds else int(spec.action_spaces[agent_id].start)
                               for agent_id in spec.agent_ids}
        self.masked = {agent_id for agent_id in spec.agent_ids  # rlf.masking: an "action_mask" observation part
                       if has_mask(spec.observation_spaces[agent_id], spec.action_spaces[agent_id], f"PPO's agent {agent_id!r}")}
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

    def tensor(self, obs) -> torch.Tensor:
        """An observation batch as the network reads it (a dict or tuple of tensors for Dict/Tuple spaces)."""
        return as_tensors(obs if isinstance(obs, dict | tuple) else np.asarray(obs), self.device)

    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        if all(agent_id in self.numpy_acting for agent_id in obs):
            return self._act_numpy(obs, explore)
        return self._act_torch(obs, explore)

    def export_policy(self, agent_id: str) -> PolicyExport:
        if self.recurrent:
            raise NotImplementedError(f"PPO with algo.memory={self.config.memory!r} carries a state from step to "
                                      "step, which a feed-forward export has no input for")
        network = copy.deepcopy(self.networks[agent_id]).cpu()
        if isinstance(network, GaussianActorCritic):
            return PolicyExport(PolicyGaussian(network), "gaussian")
        return PolicyExport(PolicyLogits(network), "categorical")

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
            network = self.networks[agent_id]
            inputs = self.tensor(batch)
            if self.recurrent:
                memory = self._memory(agent_id, observations.rows(batch))
                outputs, value, self.memory[agent_id] = network.step(inputs, memory)
            else:
                outputs, value = network(inputs)
            outputs = self.allowed(agent_id, outputs, inputs)
            if hasattr(network, "log_std"):
                actions[agent_id], extras[agent_id] = self._sample_gaussian(agent_id, network.log_std, outputs, explore)
            else:
                actions[agent_id], extras[agent_id] = self._sample_categorical(agent_id, outputs, explore)
            extras[agent_id]["value"] = value.cpu().numpy()
            if self.recurrent:  # the state this step acted from: the update re-runs sequences from it
                extras[agent_id]["memory"] = memory.cpu().numpy()
        return Acting(actions, extras)

    def allowed(self, agent_id: str, logits: torch.Tensor, inputs) -> torch.Tensor:
        """The logits with the actions the observations' mask forbids made impossible (no mask: unchanged);
        the update scores the rollout's actions under the same masked distribution."""
        return mask_logits(logits, inputs[ACTION_MASK_KEY]) if agent_id in self.masked else logits

    def _sample_categorical(self, agent_id: str, logits: torch.Tensor,
                            explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        log_probs = torch.log_softmax(logits, dim=-1)
        if explore:
            chosen = torch.multinomial(log_probs.exp(), 1, generator=self.generator).squeeze(1)
        else:
            chosen = logits.argmax(dim=-1)
        log_prob = log_probs.gather(1, chosen.unsqueeze(1)).squeeze(1)
        return chosen.cpu().numpy() + self.action_offsets[agent_id], {"log_prob": log_prob.cpu().numpy()}

    def _sample_gaussian(self, agent_id: str, log_std: torch.Tensor, mean: torch.Tensor,
                         explore: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        raw = mean + torch.exp(log_std) * torch.randn(mean.shape, generator=self.generator,
                                                      device=self.device) if explore else mean
        log_prob = gaussian_log_prob(mean, log_std, raw)
        raw_np = raw.cpu().numpy()
        low, high, dtype = self.bounds[agent_id]
        return np.clip(raw_np, low, high).astype(dtype, copy=False), {
            "log_prob": log_prob.cpu().numpy(), "raw_action": raw_np}

    def _memory(self, agent_id: str, rows: int, keep: bool = True) -> torch.Tensor:
        """The env rows' current states; zeros for a batch of another size (a new vector env, an evaluation),
        which become the agent's states where ``keep`` (acting; a value estimate changes nothing)."""
        memory = self.memory.get(agent_id)
        if memory is None or memory.shape[0] != rows:
            memory = self.networks[agent_id].initial_memory(rows, self.device)
            if keep:
                self.memory[agent_id] = memory
        return memory

    def reset_state(self, env_mask: np.ndarray) -> None:
        ended = torch.as_tensor(np.asarray(env_mask, dtype=bool), device=self.device)
        for agent_id, memory in self.memory.items():
            if memory.shape[0] == ended.shape[0]:
                self.memory[agent_id] = memory.masked_fill(ended.unsqueeze(1), 0.0)

    def on_resume(self, resume) -> None:
        if not resume.episodes_restored:  # every env starts a new episode: no memory of the old ones
            self.memory.clear()

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
            if fast is not None:
                result[agent_id] = fast.values(batch)
            elif self.recurrent:  # from the current state, which a value estimate does not advance
                memory = self._memory(agent_id, observations.rows(batch), keep=False)
                result[agent_id] = self.networks[agent_id].value(self.tensor(batch), memory).cpu().numpy()
            else:
                result[agent_id] = self.networks[agent_id].value(self.tensor(batch)).cpu().numpy()
        return result

    def state_dict(self) -> StateTree:
        state = {"networks": {agent_id: snapshot(network.state_dict()) for agent_id, network in self.networks.items()},
                 "generator": {"device": self.device.type, "state": self.generator.get_state().numpy()}}
        if self.recurrent:  # only then: checkpoints of feed-forward agents keep their layout
            state["memory"] = {agent_id: memory.cpu().numpy().copy() for agent_id, memory in self.memory.items()}
        return state

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
        if self.recurrent:
            self.memory = {agent_id: torch.as_tensor(np.asarray(memory, dtype=np.float32), device=self.device).clone()
                           for agent_id, memory in (state.get("memory") or {}).items() if agent_id in self.networks}

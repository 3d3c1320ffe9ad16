"""PPO with memory (``algo.memory = "lstm" | "gru"``): the recurrent network and its update.

The contract with the core's on-policy strategy, which needs nothing recurrent-specific from it:

* The agent keeps one state row per env. ``act`` advances it and returns, per step, the state it acted
  *from* as ``extras["memory"]`` (shape (N, width)); the rollout stores it like any extra.
* ``value(obs)`` reads the current state without advancing it. The strategy calls it for the final
  observation of a truncated episode before ``reset_state``, so the bootstrap sees that episode's memory,
  and for the observation after the rollout's last step.
* ``reset_state(ended)`` zeroes the rows of envs whose episode ended; the next ``act`` starts them fresh.
* The update re-runs the network over sequences of ``sequence_length`` steps (the whole rollout when 0),
  each starting from the stored state of its first step and zeroing the state where an episode ended
  inside it: truncated back-propagation through time, with the stored states standing for what came
  before. Minibatches are sets of whole sequences, so no sequence is cut across two gradient steps.
* The state is part of the agent's checkpoint (an exact resume continues every episode's memory); a
  resume that starts fresh episodes, an evaluation and a new batch size start from zeros.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rlf import observations
from rlf.nn import ObservationEncoder, as_tensors, mlp, nature_cnn

from .config import PPOConfig


class RecurrentActorCritic(nn.Module):
    """encoder (a Nature CNN on images) -> LSTM/GRU cell(s) -> policy and value heads.

    With ``memory_critic`` the critic has a cell of its own (Stable-Baselines3's RecurrentPPO default),
    else both heads read one cell (CleanRL's LSTM PPO). A state row is the cells' states side by side:
    (h, c) per LSTM cell, h per GRU cell. ``log_std`` exists for Box actions (a Gaussian policy)."""

    def __init__(self, encoder: ObservationEncoder, out_features: int, config: PPOConfig, *,
                 gaussian: bool = False, obs_statistics: nn.Module | None = None):
        super().__init__()
        self.encoder = encoder
        if obs_statistics is not None:
            self.obs_statistics = obs_statistics
        self.lstm = config.memory == "lstm"
        self.size = config.memory_size
        ortho = config.ortho_init
        if encoder.image:
            self.torso = nature_cnn(encoder.shape, config.cnn_features, gain=math.sqrt(2))
            features = config.cnn_features
        else:
            self.torso = nn.Identity()
            features = encoder.features
        cell = nn.LSTMCell if self.lstm else nn.GRUCell
        self.cells = nn.ModuleList([cell(features, self.size) for _ in range(2 if config.memory_critic else 1)])
        if ortho:  # CleanRL's LSTM initialisation: orthogonal weights, zero biases
            for module in self.cells:
                for name, param in module.named_parameters():
                    (nn.init.orthogonal_(param, 1.0) if "weight" in name else nn.init.zeros_(param))
        act = nn.Tanh if config.activation == "tanh" else nn.ReLU
        hidden = [] if encoder.image else config.hidden_sizes
        gain, policy_gain = (math.sqrt(2), 0.01) if ortho or encoder.image else (None, None)
        self.actor = mlp(self.size, hidden, out_features, activation=act, gain=gain, out_gain=policy_gain)
        self.critic = mlp(self.size, hidden, 1, activation=act, gain=gain, out_gain=1.0 if gain else None)
        if gaussian:
            self.log_std = nn.Parameter(torch.full((out_features,), float(config.log_std_init)))
        self.state_width = self.size * (2 if self.lstm else 1)
        self.width = self.state_width * len(self.cells)
        """Floats in one env's state row."""

    @property
    def gaussian(self) -> bool:
        return hasattr(self, "log_std")

    def initial_memory(self, batch: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(batch, self.width, device=device)

    def features(self, obs) -> torch.Tensor:
        x = self.encoder(obs)
        statistics = getattr(self, "obs_statistics", None)
        return self.torso(x if statistics is None else statistics(x))

    def _advance(self, x: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(new memory, the actor's output h, the critic's output h) after one step on features ``x``."""
        rows, outputs = [], []
        for cell, state in zip(self.cells, memory.split(self.state_width, dim=1), strict=True):
            if self.lstm:
                h, c = cell(x, tuple(state.split(self.size, dim=1)))
                rows.append(torch.cat([h, c], dim=1))
            else:
                h = cell(x, state)
                rows.append(h)
            outputs.append(h)
        return torch.cat(rows, dim=1), outputs[0], outputs[-1]

    def step(self, obs, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(policy outputs (B, A), values (B,), the memory after this step) for one batch of observations."""
        memory, actor_h, critic_h = self._advance(self.features(obs), memory)
        return self.actor(actor_h), self.critic(critic_h).squeeze(-1), memory

    def value(self, obs, memory: torch.Tensor) -> torch.Tensor:
        _, _, critic_h = self._advance(self.features(obs), memory)
        return self.critic(critic_h).squeeze(-1)

    def sequence(self, obs, memory: torch.Tensor, resets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy outputs (L*B, A) and values (L*B,) for ``obs`` laid out time-major ((L*B, ...): step t of
        sequence b at row t*B + b), from ``memory`` (B, width) before the first step; where ``resets[t, b]``
        is 1 the state is zeroed before step t (an episode ended at step t-1)."""
        steps, batch = resets.shape
        x = self.features(obs).view(steps, batch, -1)
        keep = 1.0 - resets
        actor_h, critic_h = [], []
        for t in range(steps):
            memory, a, c = self._advance(x[t], memory * keep[t].unsqueeze(1))
            actor_h.append(a)
            critic_h.append(c)
        actor = self.actor(torch.cat(actor_h))
        return actor, self.critic(torch.cat(critic_h)).squeeze(-1)


@dataclass
class Sequences:
    """One agent's rollout (T steps of N envs) cut into S sequences of up to L steps, time-major (L, S):
    ``rows[t, s]`` is the position in the flattened (T*N) rollout of step t of sequence s (the last step
    repeated as padding where a sequence is shorter), ``valid`` marks the real, alive steps, ``resets``
    the steps whose state starts fresh inside the sequence and ``starts`` each sequence's first row."""

    rows: np.ndarray
    valid: np.ndarray
    resets: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, dones: np.ndarray, alive: np.ndarray, length: int) -> Sequences:
        steps, envs = dones.shape
        length = min(length or steps, steps)
        first = np.repeat(np.arange(0, steps, length), envs)
        env = np.tile(np.arange(envs), len(first) // envs)
        offset = np.arange(length)[:, None]
        time = first[None, :] + offset
        real = time < steps
        time = np.minimum(time, steps - 1)
        resets = (offset > 0) & dones[np.maximum(time - 1, 0), env].astype(bool)
        return cls(rows=time * envs + env, valid=real & alive[time, env].astype(bool),
                   resets=resets & real, starts=first * envs + env)

    @property
    def count(self) -> int:
        return self.rows.shape[1]


def update_agent(learner, agent_id: str, rollout, advantages: np.ndarray, returns: np.ndarray, clip: float,
                 extension_stats: dict[str, list[float]]) -> tuple[dict[str, float], float | None] | None:
    """``epochs`` passes over shuffled minibatches of whole sequences: PPO's loss (and the extension's) on
    every valid step of them. Returns (the loss statistics' means, explained variance), or None where the
    agent was alive at no step."""
    config, device = learner.config, learner.device
    network: RecurrentActorCritic = learner.agent.networks[agent_id]
    alive = rollout.alive[agent_id].astype(bool)
    if not alive.any():
        return None
    layout = Sequences.of(rollout.dones[agent_id], alive, config.sequence_length)
    flat_alive = alive.reshape(-1)

    def flat(array: np.ndarray) -> np.ndarray:
        return array.reshape(-1, *array.shape[2:])

    def tensor(array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(array), device=device, dtype=dtype)

    def obs_tensor(tree):
        return as_tensors(observations.tree_map(np.ascontiguousarray, observations.merge_rows(tree)), device)

    old_values = flat(rollout.values[agent_id]).astype(np.float32)
    target = flat(returns).astype(np.float32)
    advantage = flat(advantages).astype(np.float32)
    variance = float(np.var(target[flat_alive]))
    explained = (1.0 - float(np.var((target - old_values)[flat_alive])) / variance) if variance > 0 else None
    if config.normalize_advantages:
        live = advantage[flat_alive]
        advantage = (advantage - live.mean()) / (live.std() + 1e-8)
    if network.gaussian:  # the unclipped sample the log-probability belongs to
        actions = tensor(flat(rollout.extras[agent_id]["raw_action"]).astype(np.float32))
    else:
        actions = tensor(flat(rollout.actions[agent_id]).astype(np.int64) - learner.agent.action_offsets[agent_id])
    memory = tensor(flat(rollout.extras[agent_id]["memory"])[layout.starts], torch.float32)
    samples = {"old_log_probs": tensor(flat(rollout.extras[agent_id]["log_prob"]), torch.float32),
               "old_values": tensor(old_values), "advantages": tensor(advantage), "returns": tensor(target)}
    obs = obs_tensor(rollout.obs[agent_id])
    with_extension = learner.extension is not None
    next_obs = obs_tensor(rollout.next_obs[agent_id]) if with_extension else None
    dones = tensor(flat(rollout.dones[agent_id])) if with_extension else None
    rows, valid = tensor(layout.rows), tensor(layout.valid)
    resets = tensor(layout.resets, torch.float32)
    splits = min(config.minibatches, layout.count)
    stats: list[torch.Tensor] = []
    for _ in range(config.epochs):
        for part in np.array_split(learner.rng.permutation(layout.count), splits):
            columns = torch.from_numpy(part).to(device)
            steps = rows[:, columns].reshape(-1)
            inputs = observations.index(obs, steps)
            outputs, values = network.sequence(inputs, memory[columns], resets[:, columns])
            outputs = learner.agent.allowed(agent_id, outputs, inputs)
            keep = valid[:, columns].reshape(-1)
            taken = steps[keep]
            loss, step_stats = learner.loss(network, outputs[keep], values[keep], actions[taken],
                                            *(samples[name][taken] for name in ("old_log_probs", "old_values",
                                                                                "advantages", "returns")), clip)
            stats.append(step_stats)
            if config.target_kl > 0 and step_stats[3].item() > config.target_kl:
                return learner._means(stats), explained
            if with_extension:
                from .extension import Minibatch

                extra_loss, extra_stats = learner.extension.loss(Minibatch(
                    agent_id=agent_id, obs=observations.index(obs, taken), next_obs=observations.index(next_obs, taken),
                    actions=actions[taken], indices=taken, dones=dones[taken]))
                if extra_loss is not None:
                    loss = loss + extra_loss
                for name, value in extra_stats.items():
                    extension_stats[name].append(float(value))
            learner.optimizer_step(agent_id, loss)
    return learner._means(stats), explained

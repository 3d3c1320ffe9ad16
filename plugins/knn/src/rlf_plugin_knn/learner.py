"""kNN episodic novelty as a PPO extension.

Every env has a memory of the embeddings seen so far in its current episode. Reaching a state whose
embedding is far from its k nearest neighbours in that memory earns a reward; coming back to one
already seen this episode earns little. The memories live here, across rollouts: an episode still
running when a rollout ends keeps its memory into the next rollout, and the rollout's ``dones`` clear
an env's memory where its episode ended.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from rlf_plugin_ppo.extension import Minibatch, PPOExtension, flat, per_agent_modules
from rlf_plugin_ppo.factory import learner_with

from rlf import BuildContext, Rollout
from rlf.nn.torch_utils import resolve_device, to_numpy_tree, to_torch_tree

from .config import KNNConfig
from .model import Embedding, EpisodicMemory

CHUNK = 1024
"""Samples per forward pass when embedding a whole rollout (bounds memory on image rollouts)."""

MODULE_SEED_OFFSET = 4_243
"""The embedding gets its own seed so building it does not shift the policy's initialisation."""


class KNNExtension(PPOExtension):
    """One embedding and one set of per-env episodic memories per agent id."""

    def __init__(self, context: BuildContext):
        config: KNNConfig = context.config
        self.config = config
        self.device = resolve_device(context.device)
        spec = context.env_spec
        self.agent_ids = spec.agent_ids
        self.keys, self.embeddings = per_agent_modules(context, MODULE_SEED_OFFSET, lambda agent: Embedding(
            spec.observation_spaces[agent], int(spec.action_spaces[agent].n), config.network,
            config.embedding, config.embedding_dim, config.hidden_size))
        self.memories = {agent: EpisodicMemory(
            spec.num_envs, config.memory_size, config.embedding_dim, self.device, neighbours=config.neighbours,
            kernel_epsilon=config.kernel_epsilon, cluster_distance=config.cluster_distance,
            pseudo_count_constant=config.pseudo_count_constant, max_similarity=config.max_similarity,
            distance_momentum=config.distance_momentum) for agent in spec.agent_ids}
        self._metrics: dict[str, float] = {}

    def embedding(self, agent: str) -> Embedding:
        return self.embeddings[self.keys[agent]]

    def parameters(self) -> Iterable[torch.nn.Parameter]:
        return self.embeddings.parameters()

    @torch.no_grad()
    def _embed(self, agent: str, obs: np.ndarray) -> torch.Tensor:
        net = self.embedding(agent)
        return torch.cat([net(torch.as_tensor(obs[s:s + CHUNK], device=self.device))
                          for s in range(0, len(obs), CHUNK)])

    @torch.no_grad()
    def episodic_rewards(self, agent: str, rollout: Rollout) -> np.ndarray:
        """Unscaled novelty of every next observation, walking the rollout step by step through the memories."""
        memory = self.memories[agent]
        alive = torch.as_tensor(rollout.alive[agent].astype(bool), device=self.device)
        dones = torch.as_tensor(rollout.dones[agent].astype(bool), device=self.device)
        steps, envs = alive.shape
        next_embedded = self._embed(agent, flat(rollout.next_obs[agent])).reshape(steps, envs, -1)
        # An episode's first observation enters the memory before anything is scored against it;
        # only those observations (a fresh start, or right after an episode end) need embedding.
        starts = torch.zeros(steps, envs, dtype=torch.bool, device=self.device)
        starts[0] = memory.empty
        starts[1:] = dones[:-1]
        start_rows = np.flatnonzero(starts.cpu().numpy())
        start_embedded = torch.zeros(steps * envs, next_embedded.shape[-1], device=self.device)
        if len(start_rows):
            start_embedded[start_rows] = self._embed(agent, flat(rollout.obs[agent])[start_rows])
        start_embedded = start_embedded.reshape(steps, envs, -1)
        rewards = torch.zeros(steps, envs, device=self.device)
        for t in range(steps):
            memory.add(start_embedded[t], starts[t] & alive[t])
            rewards[t] = memory.novelty(next_embedded[t], alive[t])
            memory.add(next_embedded[t], alive[t])
            memory.reset(dones[t])
        return rewards.cpu().numpy()

    def intrinsic_rewards(self, rollout: Rollout) -> dict[str, np.ndarray]:
        rewards, episodic, extrinsic, fill = {}, [], [], []
        for agent in self.agent_ids:
            alive = rollout.alive[agent].astype(bool)
            raw = self.episodic_rewards(agent, rollout)
            rewards[agent] = (self.config.intrinsic_coef * np.where(alive, raw, 0.0)).astype(np.float32)
            if alive.any():
                episodic.append(float(raw[alive].mean()))
                extrinsic.append(float(rollout.rewards[agent][alive].mean()))
            fill.append(float(self.memories[agent].filled.float().mean()))
        episodic_mean = float(np.mean(episodic)) if episodic else 0.0
        self._metrics = {"intrinsic_reward_mean": self.config.intrinsic_coef * episodic_mean,
                         "episodic_reward_mean": episodic_mean,
                         "extrinsic_reward_mean": float(np.mean(extrinsic)) if extrinsic else 0.0,
                         "knn_mean_distance": float(np.mean([self.memories[a].mean_distance for a in self.agent_ids])),
                         "memory_fill": float(np.mean(fill))}
        return rewards

    def loss(self, minibatch: Minibatch) -> tuple[torch.Tensor | None, dict[str, float]]:
        net = self.embedding(minibatch.agent_id)
        if not net.learned:
            return None, {}
        inverse_loss = net.inverse_loss(minibatch.obs, minibatch.next_obs, minibatch.actions)
        return self.config.inverse_loss_coef * inverse_loss, {"inverse_loss": float(inverse_loss.detach())}

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        # Episodic memories are not saved: a resumed run starts fresh episodes, which start with empty memories.
        return {"embeddings": to_numpy_tree(self.embeddings.state_dict()),
                "memories": {a: self.memories[a].state_dict() for a in self.agent_ids}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.embeddings.load_state_dict(to_torch_tree(state["embeddings"], self.device))
        for agent in self.agent_ids:
            self.memories[agent].load_state_dict(state["memories"][agent])
            self.memories[agent].reset()


build_learner = learner_with(KNNExtension)
"""What the registry calls: PPO's learner with the KNN extension (PPO's agent acts unchanged)."""

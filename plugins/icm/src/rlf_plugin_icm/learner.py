"""ICM as a PPO extension: intrinsic reward from the forward model's error, curiosity loss added to PPO's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from rlf_plugin_ppo.extension import Minibatch, PPOExtension, ReturnScale, flat, per_agent_modules
from rlf_plugin_ppo.factory import learner_with

from rlf import BuildContext, Rollout
from rlf.nn.torch_utils import resolve_device, to_numpy_tree, to_torch_tree

from .config import ICMConfig
from .model import ICMModule

CHUNK = 1024
"""Samples per forward pass when scoring a whole rollout (bounds memory on image rollouts)."""

MODULE_SEED_OFFSET = 7_777
"""Curiosity weights get their own seed so building them does not shift the policy's initialisation."""


class ICMExtension(PPOExtension):
    """One curiosity module per agent id (independent learners, like PPO's own networks)."""

    def __init__(self, context: BuildContext):
        config: ICMConfig = context.config
        self.config = config
        self.device = resolve_device(context.device)
        spec = context.env_spec
        self.keys, self.modules = per_agent_modules(context, MODULE_SEED_OFFSET, lambda agent: ICMModule(
            spec.observation_spaces[agent], int(spec.action_spaces[agent].n), config.network,
            config.feature_dim, config.hidden_size))
        # Rollouts hold the env's action ids; minibatches hold PPO's 0-based ones.
        self.action_offsets = {agent: int(spec.action_spaces[agent].start) for agent in spec.agent_ids}
        self.scales = ({agent: ReturnScale(spec.num_envs, config.gamma) for agent in spec.agent_ids}
                       if config.normalize_intrinsic else {})
        self._metrics: dict[str, float] = {}

    def parameters(self) -> Iterable[torch.nn.Parameter]:
        return self.modules.parameters()

    def module(self, agent: str) -> ICMModule:
        return self.modules[self.keys[agent]]

    @torch.no_grad()
    def intrinsic_rewards(self, rollout: Rollout) -> dict[str, np.ndarray]:
        rewards, intrinsic_means, extrinsic_means, peaks = {}, [], [], []
        for agent, obs in rollout.obs.items():
            module = self.module(agent)
            obs_flat, next_flat = flat(obs), flat(rollout.next_obs[agent])
            actions = flat(rollout.actions[agent]) - self.action_offsets[agent]
            errors = []
            for start in range(0, len(obs_flat), CHUNK):
                part = slice(start, start + CHUNK)
                errors.append(module.forward_error(self._tensor(obs_flat[part]), self._tensor(next_flat[part]),
                                                   self._tensor(actions[part])).cpu().numpy())
            alive = rollout.alive[agent].astype(bool)
            reward = (self.config.eta * np.concatenate(errors).reshape(alive.shape)).astype(np.float32)
            reward = np.where(alive, reward, 0.0).astype(np.float32)
            if self.scales:
                reward = self.config.intrinsic_coef * self.scales[agent](reward, alive)
            rewards[agent] = reward
            if alive.any():
                intrinsic_means.append(float(reward[alive].mean()))
                extrinsic_means.append(float(rollout.rewards[agent][alive].mean()))
                peaks.append(float(reward[alive].max()))
        self._metrics = {"intrinsic_reward_mean": _mean(intrinsic_means),
                         "intrinsic_reward_max": max(peaks, default=0.0),
                         "extrinsic_reward_mean": _mean(extrinsic_means)}
        return rewards

    def loss(self, minibatch: Minibatch) -> tuple[torch.Tensor, dict[str, float]]:
        forward_loss, inverse_loss = self.module(minibatch.agent_id).losses(minibatch.obs, minibatch.next_obs,
                                                                            minibatch.actions)
        beta = self.config.beta
        # The paper minimises lambda * policy loss + curiosity loss; PPO's loss enters with weight 1 here.
        curiosity = ((1.0 - beta) * inverse_loss + beta * forward_loss) / self.config.policy_weight
        return curiosity, {"forward_loss": float(forward_loss.detach()),
                           "inverse_loss": float(inverse_loss.detach())}

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"modules": to_numpy_tree(self.modules.state_dict())}
        if self.scales:
            state["scales"] = {agent: scale.state_dict() for agent, scale in self.scales.items()}
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.modules.load_state_dict(to_torch_tree(state["modules"], self.device))
        # a run that switched normalize_intrinsic on at resume starts its statistics afresh
        for agent, saved in state.get("scales", {}).items():
            if agent in self.scales:
                self.scales[agent].load_state_dict(saved)

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, device=self.device)


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


build_learner = learner_with(ICMExtension)
"""What the registry calls: PPO's learner with the ICM extension (PPO's agent acts unchanged)."""

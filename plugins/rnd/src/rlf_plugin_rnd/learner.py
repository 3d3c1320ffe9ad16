"""RND as a PPO extension.

PPO keeps its own value head and advantages for the extrinsic stream. This extension adds the
intrinsic stream: rewards from the predictor's error on normalised observations, divided by a running
std of the intrinsic return, a value head of its own, a separate discount and non-episodic GAE (an
episode end does not cut the intrinsic return: novelty is not lost by dying). PPO then optimises
``ext_coef * A_ext + int_coef * A_int``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from rlf_plugin_ppo.extension import Minibatch, PPOExtension, ReturnScale, flat, per_agent_modules
from rlf_plugin_ppo.factory import learner_with

from rlf import BuildContext, Rollout, RunningNormalizer, compute_gae
from rlf.nn.torch_utils import resolve_device, to_numpy_tree, to_torch_tree

from .config import RNDConfig
from .model import RNDNetworks

CHUNK = 1024
"""Samples per forward pass when scoring a whole rollout (bounds memory on image rollouts)."""

MODULE_SEED_OFFSET = 9_001
"""RND weights get their own seed so building them does not shift the policy's initialisation."""


class RNDExtension(PPOExtension):
    """One target/predictor/value-head set and its statistics per agent id."""

    def __init__(self, context: BuildContext):
        config: RNDConfig = context.config
        self.config = config
        self.device = resolve_device(context.device)
        spec = context.env_spec
        self.agent_ids = spec.agent_ids
        self.keys, self.networks = per_agent_modules(context, MODULE_SEED_OFFSET, lambda agent: RNDNetworks(
            spec.observation_spaces[agent], config.network, config.image_frames, config.output_dim,
            config.hidden_size))
        # only their mean and variance are read (RND clips with its own obs_clip), hence no clip here
        self.obs_stats = {agent: RunningNormalizer(self.net(agent).rnd_shape, clip=None) for agent in spec.agent_ids}
        self.scales = {agent: ReturnScale(spec.num_envs, config.int_gamma) for agent in spec.agent_ids}
        self.generator = torch.Generator(device=self.device)
        self.generator.manual_seed(context.seed + MODULE_SEED_OFFSET)
        self._returns: dict[str, torch.Tensor] = {}
        self._norm: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        self._metrics: dict[str, float] = {}

    def net(self, agent: str) -> RNDNetworks:
        return self.networks[self.keys[agent]]

    def parameters(self) -> Iterable[torch.nn.Parameter]:
        return [p for agent in self.agent_ids for p in self.net(agent).parameters_to_train()]

    # -- the intrinsic stream -------------------------------------------------------------------
    def normalise(self, agent: str, rnd_input: torch.Tensor) -> torch.Tensor:
        mean, std = self._norm[agent]
        return ((rnd_input - mean) / std).clamp(-self.config.obs_clip, self.config.obs_clip)

    def _refresh_normaliser(self, agent: str) -> None:
        stats = self.obs_stats[agent]
        self._norm[agent] = (torch.as_tensor(stats.mean, dtype=torch.float32, device=self.device),
                             torch.as_tensor(np.sqrt(stats.var) + 1e-8, dtype=torch.float32, device=self.device))

    @torch.no_grad()
    def raw_rewards(self, agent: str, next_obs: np.ndarray, update_stats: bool,
                    alive: np.ndarray | None = None) -> np.ndarray:
        """Distillation error of each (T*N) observation; optionally folds them into the obs statistics first."""
        net = self.net(agent)
        inputs = [net.rnd_input(self._tensor(next_obs[s:s + CHUNK])) for s in range(0, len(next_obs), CHUNK)]
        if update_stats:
            stacked = torch.cat(inputs).cpu().numpy().astype(np.float64)
            self.obs_stats[agent].update(stacked if alive is None else stacked[alive])
        self._refresh_normaliser(agent)
        return np.concatenate([net.distillation_error(self.normalise(agent, x)).cpu().numpy() for x in inputs])

    @torch.no_grad()
    def _values(self, agent: str, obs: np.ndarray) -> np.ndarray:
        net = self.net(agent)
        return np.concatenate([net.value(self._tensor(obs[s:s + CHUNK])).cpu().numpy()
                               for s in range(0, len(obs), CHUNK)])

    def extra_advantages(self, rollout: Rollout) -> dict[str, np.ndarray]:
        config = self.config
        extra, raw_means, int_means, ext_means, value_means = {}, [], [], [], []
        for agent in self.agent_ids:
            alive = rollout.alive[agent].astype(bool)
            steps, envs = alive.shape
            raw = self.raw_rewards(agent, flat(rollout.next_obs[agent]), True, flat(alive)).reshape(steps, envs)
            raw = np.where(alive, raw, 0.0)
            # The std of the discounted intrinsic return, not of the reward, sets the scale (Burda et al.).
            reward = self.scales[agent](raw, alive)
            values = self._values(agent, flat(rollout.obs[agent])).reshape(steps, envs).astype(np.float32)
            last = self._values(agent, rollout.next_obs[agent][-1]).astype(np.float32)
            next_values = np.concatenate([values[1:], last[None]], axis=0)
            never = np.zeros_like(alive)
            advantages, int_returns = compute_gae(reward, values, next_values, never, never,
                                                  config.int_gamma, config.gae_lambda)
            self._returns[agent] = torch.as_tensor(flat(int_returns), device=self.device)
            advantages = np.where(alive, advantages, 0.0)
            extra[agent] = ((config.ext_coef - 1.0) * rollout.advantages[agent]
                            + config.int_coef * advantages).astype(np.float32)
            if alive.any():
                raw_means.append(float(raw[alive].mean()))
                int_means.append(float(reward[alive].mean()))
                ext_means.append(float(rollout.rewards[agent][alive].mean()))
                value_means.append(float(values[alive].mean()))
        self._metrics = {"intrinsic_reward_mean": _mean(int_means), "intrinsic_reward_raw_mean": _mean(raw_means),
                         "extrinsic_reward_mean": _mean(ext_means), "intrinsic_value_mean": _mean(value_means),
                         "intrinsic_return_std": float(np.mean([self.scales[a].std for a in self.agent_ids]))}
        return extra

    # -- the update -----------------------------------------------------------------------------
    def loss(self, minibatch: Minibatch) -> tuple[torch.Tensor, dict[str, float]]:
        agent, net = minibatch.agent_id, self.net(minibatch.agent_id)
        error = net.distillation_error(self.normalise(agent, net.rnd_input(minibatch.next_obs)))
        keep = (torch.rand(len(error), generator=self.generator, device=self.device)
                < self.config.predictor_update_proportion).float()
        predictor_loss = (error * keep).sum() / keep.sum().clamp(min=1.0)
        int_value_loss = 0.5 * (net.value(minibatch.obs) - self._returns[agent][minibatch.indices]).pow(2).mean()
        total = predictor_loss + self.config.int_value_coef * int_value_loss
        return total, {"predictor_loss": float(predictor_loss.detach()),
                       "predictor_share": float(keep.mean()), "int_value_loss": float(int_value_loss.detach())}

    def metrics(self) -> dict[str, float]:
        return dict(self._metrics)

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"networks": to_numpy_tree(self.networks.state_dict()),
                "obs_stats": {a: self.obs_stats[a].state_dict() for a in self.agent_ids},
                "return_stats": {a: self.scales[a].state_dict()["return_stats"] for a in self.agent_ids},
                "running_returns": {a: self.scales[a].running.copy() for a in self.agent_ids},
                "generator": self.generator.get_state().numpy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.networks.load_state_dict(to_torch_tree(state["networks"], self.device))
        for agent in self.agent_ids:
            self.obs_stats[agent].load_state_dict(state["obs_stats"][agent])
            self.scales[agent].load_state_dict({"return_stats": state["return_stats"][agent],
                                                "running_returns": state["running_returns"][agent]})
            self._refresh_normaliser(agent)
        self.generator.set_state(torch.as_tensor(np.asarray(state["generator"], dtype=np.uint8)))

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array, device=self.device)


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


build_learner = learner_with(RNDExtension)
"""What the registry calls: PPO's learner with the RND extension (PPO's agent acts unchanged)."""

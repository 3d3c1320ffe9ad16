"""APPO's update: PPO's clipped surrogate on the ratio between the learner's policy and the behaviour
policy that acted (the actors' stale weights), V-trace value targets and advantages, an entropy bonus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from rlf_plugin_ppo.model import snapshot
from torch import nn

from rlf import BuildContext, Learner, RunningNormalizer, StateTree
from rlf.nn import set_threads
from rlf.nn.torch_utils import load_optimizer_state, set_torch_rng_state, torch_rng_state

from .agent import APPOAgent
from .config import APPOConfig
from .vtrace import vtrace


@dataclass
class Trajectory:
    """One chunk of one agent id's steps, (T, B, ...) arrays: B envs of one actor (or several actors'
    chunks side by side), each column a consecutive run of T steps."""

    agent_id: str
    obs: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    dones: np.ndarray
    """Terminated or truncated: the trace is cut after the step."""
    next_obs: np.ndarray
    """What each step led to; at an episode end the final observation."""
    behaviour_log_probs: np.ndarray
    staleness: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Learner updates between the weights that acted and the learner's now, per step (for metrics)."""

    @property
    def num_steps(self) -> int:
        return int(self.rewards.size)


class APPOLearner(Learner):
    def __init__(self, agent: APPOAgent, config: APPOConfig, context: BuildContext):
        self.agent = agent
        self.config = config
        self.context = context
        self.device = agent.device
        self.updates = 0
        self.env_steps = 0
        # PPO normalises over a whole rollout (4,096 samples in the Mario preset); one APPO chunk is a
        # few steps of two envs, whose own spread is mostly noise when nothing happened, so the window
        # (when set) carries the mean and scale across chunks, forgetting the oldest.
        self.advantage_stats = RunningNormalizer(clip=None, window=config.advantage_window or None)
        self.rng = np.random.default_rng(np.random.SeedSequence([context.seed, 2]))
        torch.manual_seed(context.seed)
        params = [p for network in agent.networks.values() for p in network.parameters()]
        self._fast_kernels = self.device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.Adam(params, lr=config.lr, eps=config.adam_eps, fused=self._fast_kernels or None)

    def worker_init(self) -> None:
        # actors share the machine's cores with the learner and with each other
        set_threads(1)

    def push_state(self) -> StateTree:
        return self.agent.push_state(self.updates)

    # -- the update -----------------------------------------------------------------------------
    def _tensor(self, array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(array), device=self.device, dtype=dtype)

    def _remaining(self) -> float:
        horizon = self.config.schedule_steps or self.context.run.steps
        return max(0.0, 1.0 - self.env_steps / max(1, horizon))

    def learn(self, batch: Trajectory) -> dict[str, float]:
        config = self.config
        self.agent.threads.for_learning()
        remaining = self._remaining()
        learning_rate = config.lr * (remaining if config.anneal_lr else 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        clip = config.clip_coef * (remaining if config.anneal_clip else 1.0)
        network = self.agent.networks[batch.agent_id]
        steps, width = batch.rewards.shape
        count = steps * width
        obs = self._tensor(batch.obs.reshape(count, *batch.obs.shape[2:]))
        actions = self._tensor(batch.actions.reshape(count).astype(np.int64)
                               - self.agent.action_offsets[batch.agent_id])
        behaviour = self._tensor(batch.behaviour_log_probs.reshape(count), torch.float32)
        targets = self._targets(network, batch, obs, actions)
        advantages = targets.advantages.reshape(count)
        scale = float(advantages.std())
        if config.normalize_advantages and config.advantage_window:
            self.advantage_stats.update(advantages)
            mean, scale = float(self.advantage_stats.mean), float(np.sqrt(self.advantage_stats.var))
            advantages = ((advantages - mean) / (scale + 1e-8)).astype(np.float32)
        elif config.normalize_advantages and count > 1:
            advantages = (advantages - advantages.mean()) / (scale + 1e-8)
        vs = self._tensor(targets.vs.reshape(count))
        advantages = self._tensor(advantages)
        splits = min(config.minibatches, count)
        stats: list[torch.Tensor] = []
        for _ in range(config.epochs):
            order = torch.from_numpy(self.rng.permutation(count)).to(self.device)
            for rows in torch.tensor_split(order, splits):
                logits, values = network(obs[rows])
                log_probs = torch.log_softmax(logits, dim=-1)
                log_prob = log_probs.gather(1, actions[rows].unsqueeze(1)).squeeze(1)
                log_ratio = log_prob - behaviour[rows]
                ratio = log_ratio.exp()
                surrogate = torch.min(ratio * advantages[rows],
                                      ratio.clamp(1.0 - clip, 1.0 + clip) * advantages[rows])
                policy_loss = -surrogate.mean()
                value_loss = 0.5 * (values - vs[rows]).pow(2).mean()
                entropy = -(log_probs.exp() * log_probs).sum(dim=-1).mean()
                loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if config.max_grad_norm > 0:
                    nn.utils.clip_grad_norm_(network.parameters(), config.max_grad_norm,
                                             foreach=self._fast_kernels or None)
                self.optimizer.step()
                with torch.no_grad():
                    # KL(behaviour || learner) estimated from the behaviour's own samples (k3)
                    approx_kl = ((ratio - 1.0) - log_ratio).mean()
                    clipped = ((ratio - 1.0).abs() > clip).float().mean()
                    stats.append(torch.stack([policy_loss.detach(), value_loss.detach(), entropy.detach(),
                                              approx_kl, clipped]))
        self.updates += 1
        self.env_steps += count
        means = torch.stack(stats).mean(dim=0).tolist()
        variance = float(np.var(targets.vs))
        metrics = dict(zip(("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"), means, strict=True))
        metrics.update({
            "learning_rate": learning_rate, "clip_coef": clip, "advantage_scale": scale,
            "mean_rho": float(targets.rhos.mean()),
            "rho_clipped": float((targets.rhos > config.rho_bar).mean()),
            "explained_variance": 1.0 - float(np.var(targets.vs - targets.values)) / variance if variance > 0 else 0.0,
        })
        if batch.staleness.size:
            metrics["staleness"] = float(np.mean(batch.staleness))
        return metrics

    @torch.no_grad()
    def _targets(self, network: nn.Module, batch: Trajectory, obs: torch.Tensor, actions: torch.Tensor) -> _Targets:
        """V-trace from the learner's current policy and values, before this update changes them."""
        steps, width = batch.rewards.shape
        logits, values = network(obs)
        target_log_probs = torch.log_softmax(logits, dim=-1).gather(1, actions.unsqueeze(1)).squeeze(1)
        values = values.reshape(steps, width).cpu().numpy()
        # V(x_{t+1}) is V(obs[t+1]) inside an episode; only the chunk's last step and episode ends
        # (the final observation, not the reset one in obs[t+1]) need a forward pass of their own
        need = batch.dones.astype(bool).copy()
        need[-1] = True
        next_values = np.concatenate([values[1:], np.zeros((1, width), np.float32)], axis=0)
        if need.any():
            next_values[need] = network.value(self._tensor(batch.next_obs[need])).cpu().numpy()
        result = vtrace(batch.behaviour_log_probs, target_log_probs.reshape(steps, width).cpu().numpy(),
                        batch.rewards, values, next_values, batch.terminated, batch.dones,
                        gamma=self.config.gamma, lam=self.config.gae_lambda, rho_bar=self.config.rho_bar,
                        c_bar=self.config.c_bar)
        rhos = np.exp(target_log_probs.cpu().numpy().astype(np.float64)
                      - batch.behaviour_log_probs.reshape(-1).astype(np.float64))
        return _Targets(result.vs, result.advantages, values, rhos)

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> StateTree:
        return {"optimizer": snapshot(self.optimizer.state_dict()), "updates": self.updates,
                "env_steps": self.env_steps, "rng": self.rng.bit_generator.state, "torch_rng": torch_rng_state(),
                "advantage_stats": self.advantage_stats.state_dict()}

    def load_state_dict(self, state: StateTree) -> None:
        load_optimizer_state(self.optimizer, state["optimizer"], {"fused": self._fast_kernels or None})
        self.updates = int(state["updates"])
        self.env_steps = int(state["env_steps"])
        self.rng.bit_generator.state = state["rng"]
        set_torch_rng_state(state["torch_rng"])
        stats = state.get("advantage_stats")  # checkpoints from before advantage_window have none
        if stats is not None and "seen" in stats:
            stats = _from_moments(stats, self.config.advantage_window)
        if stats is not None:
            self.advantage_stats.load_state_dict(stats)


@dataclass
class _Targets:
    vs: np.ndarray
    advantages: np.ndarray
    values: np.ndarray
    rhos: np.ndarray


def _from_moments(state: StateTree, window: int) -> StateTree:
    """The running normalizer's state from the first form of ``advantage_window``'s (the series' appo-r2
    runs of 2026-12-03/04 wrote it): an exponential mean and mean square over min(seen, window)
    samples, which are the normalizer's count, mean and M2 / count."""
    count = float(min(int(state["seen"]), window) if window else int(state["seen"]))
    mean = float(state["mean"])
    variance = max(float(state["square"]) - mean ** 2, 0.0)
    return {"count": count, "mean": np.array(mean), "m2": np.array(variance * count)}

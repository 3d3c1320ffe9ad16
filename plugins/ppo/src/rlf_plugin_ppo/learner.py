"""PPO's update: the clipped surrogate objective on the core's rollout and GAE, with the hooks of
``PPOExtension`` called at the documented points (see extension.py)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from rlf import (
    BuildContext,
    CheckpointError,
    Learner,
    Rollout,
    RunningNormalizer,
    StateTree,
    compute_gae,
    observations,
)
from rlf.nn import as_tensors
from rlf.nn.torch_utils import (
    load_optimizer_state,
    set_torch_rng_state,
    torch_rng_state,
)

from . import recurrent
from .config import PPOConfig
from .extension import Minibatch, PPOExtension
from .loss import STAT_NAMES, PPOLoss, policy_loss, ppo_loss
from .model import PPOAgent, gaussian_entropy, gaussian_log_prob, snapshot
from .numpy_update import NumpyUpdate, check_numpy_backend
from .recurrent import RecurrentActorCritic


@dataclass
class AgentSamples:
    """One agent's rollout, flattened over (T, N), keeping only the steps where the agent was alive."""

    indices: np.ndarray
    obs: torch.Tensor
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    old_values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    next_obs: torch.Tensor | None
    dones: torch.Tensor | None
    explained_variance: float | None


class PPOLearner(Learner):
    """Updates every agent id's network from its own part of the rollout (independent learners).

    All networks and the extension's parameters share one Adam optimizer; each agent's minibatch
    step only carries gradients for that agent's network (plus the extension's), and Adam skips
    parameters without a gradient, so agents stay independent. ``last_advantages`` and
    ``last_returns`` hold the targets of the latest update (after the extension's changes).
    """

    def __init__(self, agent: PPOAgent, config: PPOConfig, context: BuildContext,
                 extension: PPOExtension | None = None):
        self.agent = agent
        self.config = config
        self.context = context
        self.device = agent.device
        self.extension = extension
        self.env_steps = 0
        self.updates = 0
        self.rng = np.random.default_rng(np.random.SeedSequence([context.seed, 1]))
        self.last_advantages: dict[str, np.ndarray] = {}
        self.last_returns: dict[str, np.ndarray] = {}
        # Extensions that draw from torch's global RNG (network init, sampling) become reproducible.
        torch.manual_seed(context.seed)
        if extension is not None:
            extension.bind(self)
        self.agent_parameters = {agent_id: list(network.parameters())
                                 for agent_id, network in agent.networks.items()}
        owned = {id(p) for params in self.agent_parameters.values() for p in params}
        self.extension_parameters: list[nn.Parameter] = []
        for param in (extension.parameters() if extension is not None else []):
            if id(param) not in owned:
                owned.add(id(param))
                self.extension_parameters.append(param)
        groups = [{"params": [p for params in self.agent_parameters.values() for p in params]}]
        if self.extension_parameters:
            groups.append({"params": self.extension_parameters})
        # fused: one kernel updates every parameter instead of torch's per-parameter Python loop (the
        # same Adam update); with foreach gradient clipping it cut a 64-sample minibatch step of SB3's
        # default 64x64 networks by a quarter (docs/benchmarks/2026-11-30.md). Other devices take torch's default.
        self._fast_kernels = self.device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.Adam(groups, lr=config.lr, eps=config.adam_eps, fused=self._fast_kernels or None)
        # algo.backend="numpy": small MLPs on the CPU learn with numpy_update.py's hand-derived step (the
        # same maths as loss.py, a fraction of torch's per-op overhead); the acting views then follow
        # the parameters into their flat buffer. The torch loop below is the default and the reference.
        self.numpy_updates: dict[str, NumpyUpdate] = {}
        if config.backend == "numpy":
            check_numpy_backend(agent.networks, config, extension)
            self.numpy_updates = {agent_id: NumpyUpdate(network, self.optimizer)
                                  for agent_id, network in agent.networks.items()}
        for agent_id in self.numpy_updates:
            if agent_id in agent.numpy_acting:
                agent.numpy_acting[agent_id].refresh()
        # algo.normalize_obs: the statistics of every observation seen so far (float64, exact over long
        # runs); the network's buffers hold the float32 copy acting and exports use.
        self.obs_statistics = {agent_id: RunningNormalizer((network.encoder.features,), clip=None, min_std=1e-4)
                               for agent_id, network in agent.networks.items()
                               if hasattr(network, "obs_statistics")}
        # algo.normalize_reward: per env, the discounted return so far, and the statistics of those returns
        self.return_statistics: dict[str, RunningNormalizer] = {}
        self.running_returns: dict[str, np.ndarray] = {}
        if config.normalize_reward:
            self.return_statistics = {agent_id: RunningNormalizer((), clip=None, min_std=1e-4)
                                      for agent_id in agent.networks}

    def weights(self) -> StateTree:
        """The networks without the sampling generator: what an acting copy loads after an update
        (``algo.overlap_update``) while it keeps drawing from its own stream."""
        return {"networks": {agent_id: snapshot(network.state_dict())
                             for agent_id, network in self.agent.networks.items()}}

    # -- the update -----------------------------------------------------------------------------
    def learn(self, rollout: Rollout) -> dict[str, float]:
        self.agent.threads.for_learning()
        remaining = self._remaining()
        learning_rate = self._set_learning_rate(remaining)
        clip = self.config.clip_coef * (remaining if self.config.anneal_clip else 1.0)
        advantages, returns = self._targets(rollout)
        self.last_advantages, self.last_returns = advantages, returns
        per_agent: dict[str, list[float]] = defaultdict(list)
        extension_stats: dict[str, list[float]] = defaultdict(list)
        for agent_id in self.agent.networks:
            if agent_id not in rollout.obs:
                continue
            if isinstance(self.agent.networks[agent_id], RecurrentActorCritic):  # recurrent.py: whole sequences
                result = recurrent.update_agent(self, agent_id, rollout, advantages[agent_id], returns[agent_id],
                                                clip, extension_stats)
            else:
                batch = self._flatten(rollout, agent_id, advantages[agent_id], returns[agent_id])
                result = None if batch is None else (self._update_agent(agent_id, batch, clip, extension_stats),
                                                     batch.explained_variance)
            if result is None:  # the agent took no part in this rollout
                continue
            for name, value in result[0].items():
                per_agent[name].append(value)
            if result[1] is not None:
                per_agent["explained_variance"].append(result[1])
        self.env_steps += rollout.num_steps
        self.updates += 1
        metrics = {name: float(np.mean(values)) for name, values in per_agent.items()}
        metrics["learning_rate"] = learning_rate
        metrics["clip_coef"] = clip
        self._update_obs_statistics(rollout)
        for network in self.agent.networks.values():
            if hasattr(network, "log_std"):
                metrics.setdefault("action_std", float(network.log_std.detach().exp().mean()))
        metrics.update({name: float(np.mean(values)) for name, values in extension_stats.items()})
        if self.extension is not None:
            metrics.update(self.extension.metrics())
        return metrics

    def _remaining(self) -> float:
        """The fraction of the schedule still ahead at this update (1 at the first, taken before this
        rollout's steps are counted), which the linear schedules scale by. The horizon is
        ``schedule_steps`` when set, so that a run continued to a bigger budget keeps its schedule."""
        horizon = self.config.schedule_steps or self.context.run.steps
        return max(0.0, 1.0 - self.env_steps / max(1, horizon))

    def _set_learning_rate(self, remaining: float) -> float:
        learning_rate = self.config.lr
        if self.config.anneal_lr:
            learning_rate *= remaining
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate
        return learning_rate

    def _update_obs_statistics(self, rollout: Rollout) -> None:
        """After the update: this rollout's observations join the statistics, which the next rollout acts
        with (changing them before the update would score the rollout's actions on other inputs)."""
        for agent_id, statistics in self.obs_statistics.items():
            if agent_id not in rollout.obs:
                continue
            network = self.agent.networks[agent_id]
            alive = rollout.alive[agent_id].reshape(-1).astype(bool)
            with torch.no_grad():
                obs = torch.as_tensor(np.ascontiguousarray(rollout.obs[agent_id].reshape(
                    -1, *rollout.obs[agent_id].shape[2:])[alive]), device=self.device)
                statistics.update(network.encoder(obs).cpu().numpy().astype(np.float64))
            network.obs_statistics.set(statistics.mean, statistics.std)

    def _scaled_rewards(self, agent_id: str, rollout: Rollout) -> np.ndarray:
        """Rewards divided by the running std of the discounted return (rl-baselines3-zoo's VecNormalize
        reward scaling, with this run's gamma), clipped to +-normalize_clip; the statistics take each
        step's running return in turn, and a finished episode's return starts again from 0."""
        rewards, dones, alive = rollout.rewards[agent_id], rollout.dones[agent_id], rollout.alive[agent_id]
        statistics = self.return_statistics[agent_id]
        running = self.running_returns.get(agent_id)
        if running is None or running.shape != rewards.shape[1:]:
            running = np.zeros(rewards.shape[1:], dtype=np.float64)
        for t in range(len(rewards)):
            running = running * self.config.gamma + rewards[t]
            statistics.update(running[alive[t].astype(bool)])
            running = np.where(dones[t].astype(bool), 0.0, running)
        self.running_returns[agent_id] = running
        limit = self.config.normalize_clip
        return np.clip(rewards / statistics.std, -limit, limit).astype(np.float32)

    def _targets(self, rollout: Rollout) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Hooks 1 and 2: intrinsic rewards re-run GAE; extra advantages are added on top. Scaled rewards
        (``algo.normalize_reward``) re-run GAE too, the extension's bonus added to them."""
        advantages, returns = dict(rollout.advantages), dict(rollout.returns)
        config = self.config
        rewards = {agent_id: self._scaled_rewards(agent_id, rollout) for agent_id in self.return_statistics
                   if agent_id in rollout.rewards}
        bonuses = (self.extension.intrinsic_rewards(rollout) or {}) if self.extension is not None else {}
        for agent_id in {*rewards, *bonuses}:
            reward = rewards.get(agent_id, rollout.rewards[agent_id])
            if agent_id in bonuses:
                reward = reward + self._check_shape("intrinsic_rewards", agent_id, bonuses[agent_id], reward.shape)
            advantages[agent_id], returns[agent_id] = compute_gae(
                reward, rollout.values[agent_id], rollout.next_values[agent_id],
                rollout.terminated[agent_id], rollout.dones[agent_id], config.gamma, config.gae_lambda)
        if self.extension is None:
            return advantages, returns
        for agent_id, extra in (self.extension.extra_advantages(rollout) or {}).items():
            extra = self._check_shape("extra_advantages", agent_id, extra, advantages[agent_id].shape)
            advantages[agent_id] = advantages[agent_id] + extra
        return advantages, returns

    def _check_shape(self, hook: str, agent_id: str, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        values = np.asarray(values, dtype=np.float32)
        if values.shape != shape:
            raise ValueError(f"{type(self.extension).__name__}.{hook} returned shape {values.shape} for agent "
                             f"{agent_id!r}; it must match the rollout's (T, N) = {shape}")
        return values

    def _flatten(self, rollout: Rollout, agent_id: str, advantages: np.ndarray,
                 returns: np.ndarray) -> AgentSamples | None:
        indices = np.flatnonzero(rollout.alive[agent_id].reshape(-1))
        if indices.size == 0:
            return None

        def take(array: np.ndarray) -> np.ndarray:
            return array.reshape(-1, *array.shape[2:])[indices]

        def tensor(array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
            return torch.as_tensor(np.ascontiguousarray(array), device=self.device, dtype=dtype)

        def obs_tensor(tree):  # an array, or a dict/tuple of arrays for Dict/Tuple observations
            taken = observations.index(observations.merge_rows(tree), indices)
            return as_tensors(observations.tree_map(np.ascontiguousarray, taken), self.device)

        old_values = take(rollout.values[agent_id]).astype(np.float32)
        target = take(returns).astype(np.float32)
        advantage = take(advantages).astype(np.float32)
        variance = float(np.var(target))
        explained = 1.0 - float(np.var(target - old_values)) / variance if variance > 0 else None
        if self.config.normalize_advantages:
            advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        if agent_id in self.agent.bounds:  # the unclipped sample the log-probability belongs to
            actions = take(rollout.extras[agent_id]["raw_action"]).astype(np.float32)
        else:
            actions = take(rollout.actions[agent_id]).astype(np.int64) - self.agent.action_offsets[agent_id]
        with_extension = self.extension is not None
        return AgentSamples(
            indices=indices,
            obs=obs_tensor(rollout.obs[agent_id]),
            actions=tensor(actions),
            old_log_probs=tensor(take(rollout.extras[agent_id]["log_prob"]), torch.float32),
            old_values=tensor(old_values),
            advantages=tensor(advantage),
            returns=tensor(target),
            next_obs=obs_tensor(rollout.next_obs[agent_id]) if with_extension else None,
            dones=tensor(take(rollout.dones[agent_id])) if with_extension else None,
            explained_variance=explained,
        )

    def _update_agent(self, agent_id: str, batch: AgentSamples, clip: float,
                      extension_stats: dict[str, list[float]]) -> dict[str, float]:
        """Hook 3: ``epochs`` passes of shuffled minibatches; PPO's loss plus the extension's."""
        config = self.config
        network = self.agent.networks[agent_id]
        count = len(batch.indices)
        splits = min(config.minibatches, count)
        # np.array_split's chunk sizes, cut from one index tensor per epoch (views, no per-minibatch copy)
        bounds = np.cumsum([0, *(len(part) for part in np.array_split(np.empty(count), splits))]).tolist()
        if agent_id in self.numpy_updates:
            return self._update_agent_numpy(self.numpy_updates[agent_id], batch, clip, bounds)
        stats: list[torch.Tensor] = []
        for _ in range(config.epochs):
            order = self.rng.permutation(count)
            order_rows = torch.from_numpy(order).to(self.device)
            for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
                chunk, rows = order[start:stop], order_rows[start:stop]
                inputs = observations.index(batch.obs, rows)
                outputs, values = network(inputs)
                outputs = self.agent.allowed(agent_id, outputs, inputs)
                loss, step_stats = self.loss(network, outputs, values, batch.actions[rows], batch.old_log_probs[rows],
                                             batch.old_values[rows], batch.advantages[rows], batch.returns[rows], clip)
                stats.append(step_stats)
                approx_kl = step_stats[3]
                # Checked before stepping: the policy already moved this far from the one that acted.
                if config.target_kl > 0 and approx_kl.item() > config.target_kl:
                    return self._means(stats)
                if self.extension is not None:
                    extra_loss, extra_stats = self.extension.loss(self._minibatch(agent_id, batch, chunk, rows))
                    if extra_loss is not None:
                        loss = loss + extra_loss
                    for name, value in extra_stats.items():
                        extension_stats[name].append(float(value))
                self.optimizer_step(agent_id, loss)
        return self._means(stats)

    def loss(self, network: nn.Module, outputs: torch.Tensor, values: torch.Tensor, actions: torch.Tensor,
             old_log_probs: torch.Tensor, old_values: torch.Tensor, advantages: torch.Tensor, returns: torch.Tensor,
             clip: float) -> PPOLoss:
        """PPO's loss on one minibatch of the network's ``outputs`` (logits, or a Gaussian's means) and values."""
        config = self.config
        if hasattr(network, "log_std"):  # a Gaussian policy (with or without memory)
            return policy_loss(gaussian_log_prob(outputs, network.log_std, actions), gaussian_entropy(network.log_std),
                               values, old_log_probs, old_values, advantages, returns, clip=clip,
                               value_coef=config.value_coef, entropy_coef=config.entropy_coef,
                               value_clip=config.value_clip)
        return ppo_loss(outputs, values, actions, old_log_probs, old_values, advantages, returns, clip=clip,
                        value_coef=config.value_coef, entropy_coef=config.entropy_coef, value_clip=config.value_clip)

    def optimizer_step(self, agent_id: str, loss: torch.Tensor) -> None:
        """One gradient step on ``loss`` over the agent's network and the extension's parameters."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.max_grad_norm > 0:
            params = [p for p in (*self.agent_parameters[agent_id], *self.extension_parameters) if p.grad is not None]
            nn.utils.clip_grad_norm_(params, self.config.max_grad_norm, foreach=self._fast_kernels or None)
        self.optimizer.step()

    def _update_agent_numpy(self, update: NumpyUpdate, batch: AgentSamples, clip: float,
                            bounds: list[int]) -> dict[str, float]:
        """``_update_agent``'s loop for a network that ``NumpyUpdate`` supports (no extension)."""
        config = self.config
        obs, actions, old_log_probs, advantages, returns = (
            t.numpy() for t in (batch.obs, batch.actions, batch.old_log_probs, batch.advantages, batch.returns))
        stats: list[np.ndarray] = []
        try:
            for _ in range(config.epochs):
                order = self.rng.permutation(len(batch.indices))
                for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
                    rows = order[start:stop]
                    values, stop_now = update.minibatch(
                        obs[rows], actions[rows], old_log_probs[rows], advantages[rows], returns[rows], clip,
                        config.value_coef, config.entropy_coef, config.max_grad_norm, config.target_kl)
                    stats.append(values)
                    if stop_now:
                        return self._numpy_means(stats)
            return self._numpy_means(stats)
        finally:
            update.sync()

    @staticmethod
    def _numpy_means(stats: list[np.ndarray]) -> dict[str, float]:
        return dict(zip(STAT_NAMES, np.mean(stats, axis=0).tolist(), strict=True))

    @staticmethod
    def _means(stats: list[torch.Tensor]) -> dict[str, float]:
        return dict(zip(STAT_NAMES, torch.stack(stats).mean(dim=0).tolist(), strict=True))

    def _minibatch(self, agent_id: str, batch: AgentSamples, chunk: np.ndarray, rows: torch.Tensor) -> Minibatch:
        return Minibatch(agent_id=agent_id, obs=observations.index(batch.obs, rows),
                         next_obs=observations.index(batch.next_obs, rows),
                         actions=batch.actions[rows],
                         indices=torch.as_tensor(batch.indices[chunk], device=self.device),
                         dones=batch.dones[rows])

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> StateTree:
        state = {"optimizer": snapshot(self.optimizer.state_dict()), "env_steps": self.env_steps,
                 "updates": self.updates, "rng": self.rng.bit_generator.state, "torch_rng": torch_rng_state(),
                 "extension": self.extension.state_dict() if self.extension is not None else {}}
        # only when normalising: checkpoints of runs without it keep their layout
        if self.obs_statistics:
            state["obs_statistics"] = {a: s.state_dict() for a, s in self.obs_statistics.items()}
        if self.return_statistics:
            state["return_statistics"] = {a: {**s.state_dict(), "running": self.running_returns.get(a)}
                                          for a, s in self.return_statistics.items()}
        return state

    def load_state_dict(self, state: StateTree) -> None:
        load_optimizer_state(self.optimizer, state["optimizer"], {"fused": self._fast_kernels or None})
        self.env_steps = int(state["env_steps"])
        self.updates = int(state["updates"])
        for update in self.numpy_updates.values():
            update.bind()  # the optimizer's state was replaced: point it back at the flat buffers
        self.rng.bit_generator.state = state["rng"]
        set_torch_rng_state(state["torch_rng"])
        if self.extension is not None:
            self.extension.load_state_dict(state["extension"])
        for key, wanted in (("obs_statistics", self.obs_statistics), ("return_statistics", self.return_statistics)):
            if wanted and key not in state:
                raise CheckpointError(f"checkpoint holds no PPO {key.replace('_', ' ')}: it was trained without "
                                      f"algo.normalize_{'obs' if key == 'obs_statistics' else 'reward'}; "
                                      "resume it with the setting it was trained with")
        for agent_id, statistics in self.obs_statistics.items():
            statistics.load_state_dict(state["obs_statistics"][agent_id])
        for agent_id, statistics in self.return_statistics.items():
            saved = state["return_statistics"][agent_id]
            statistics.load_state_dict(saved)
            running = saved.get("running")
            if running is None:
                self.running_returns.pop(agent_id, None)
            else:
                self.running_returns[agent_id] = np.asarray(running, dtype=np.float64).copy()

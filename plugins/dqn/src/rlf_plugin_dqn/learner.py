"""The learning side of DQN: replay, target networks and the TD update, one set per agent id.

Independent learners (as in PPAGE's predator-prey baselines): every agent has its own network, optimizer and replay, and learns
only from its own rewards. What they share is the optimizer-step counter that times target syncs,
so ``target_update_interval`` counts optimizer steps of all agents together.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional

from rlf import Learner, ReplayBuffer, StateTree, Transitions, observations
from rlf.masking import ACTION_MASK_KEY
from rlf.nn import mask_logits, set_threads
from rlf.nn.torch_utils import (
    load_optimizer_state,
    optimizer_state,
    set_torch_rng_state,
    to_numpy_tree,
    to_torch_tree,
    torch_rng_state,
)

from .agent import DQNAgent, check_encoded
from .config import DQNConfig
from .model import direct_forward
from .replay import FrameReplay, PartsReplay


def make_replay(config: DQNConfig, agent: DQNAgent, agent_id: str) -> ReplayBuffer | FrameReplay | PartsReplay:
    layout = agent.layouts[agent_id]
    if layout.structured:
        pixels = {key: (part.shape, part.stack_axis) for key, part in layout.parts.items()
                  if part.pixels and len(part.shape) >= 2}
        if config.frame_replay == "on" and not pixels:
            raise ValueError(f"algo.frame_replay=on needs a uint8 image part, agent {agent_id!r} observes "
                             f"{layout.space}; use algo.frame_replay=auto")
        if pixels and config.frame_replay != "off":
            return PartsReplay(config.buffer_size, layout.space, pixels, _part_dtype)
        return ReplayBuffer(config.buffer_size, (), obs_space=layout.space, obs_dtypes=_part_dtype)
    frames = config.frame_replay == "on" or (config.frame_replay == "auto" and layout.pixels)
    if frames:
        if len(layout.shape) < 2:
            raise ValueError(f"algo.frame_replay=on needs stacked image observations, agent {agent_id!r} "
                             f"observes shape {layout.shape}; use algo.frame_replay=auto")
        return FrameReplay(config.buffer_size, layout.shape, stack_axis=layout.stack_axis)
    return ReplayBuffer(config.buffer_size, layout.shape, obs_dtype=layout.dtype)


def _part_dtype(part) -> np.dtype:
    """How a Dict/Tuple part is stored: uint8 parts (images, small ones too) as uint8, a quarter of float32's
    memory (the encoder scales them either way); Discrete ids as int64; other parts as float32."""
    if isinstance(part, spaces.Discrete):
        return np.dtype(np.int64)
    return np.dtype(np.uint8) if part.dtype == np.uint8 else np.dtype(np.float32)


class DQNLearner(Learner):
    def __init__(self, agent: DQNAgent, config: DQNConfig, seed: int, state_dim: int | None = None,
                 save_replay: bool = True):
        self.agent = agent
        self.config = config
        self.save_replay = save_replay
        self.device = agent.device
        self.state_dim = state_dim
        self.rng = np.random.default_rng(seed + 1)
        # torch's global RNG (saved in checkpoints) would otherwise start from a random seed per process
        torch.manual_seed(seed)
        self._on_cpu = self.device.type == "cpu"
        self._fast_kernels = self.device.type in ("cpu", "cuda")
        """Fused Adam and foreach gradient clipping exist for these devices; others take torch's default."""
        self.targets: dict[str, nn.Module] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.buffers: dict[str, ReplayBuffer | FrameReplay | PartsReplay] = {}
        self._params: dict[str, list[nn.Parameter]] = {}
        """Each online network's parameters, listed once: clipping and zeroing walk this list instead of
        ``Module.parameters()`` (a generator over named_modules) every gradient step."""
        self._forward: dict[str, tuple] = {}
        """(online, target) forward passes per agent: the modules, or with ``algo.backend="fast"``
        ``model.direct_forward`` for plain MLPs."""
        for agent_id, net in agent.networks.items():
            target = copy.deepcopy(net)
            target.requires_grad_(False)
            self.targets[agent_id] = target
            # fused: one kernel updates every parameter instead of a Python loop over them (same Adam
            # update); with foreach gradient clipping it cut the CPU time of a CartPole gradient step
            # (256x256 MLP, batch 64) from 1.69 to 1.33 ms (docs/benchmarks/2026-11-30.md)
            self.optimizers[agent_id] = torch.optim.Adam(net.parameters(), lr=config.lr, eps=config.adam_eps,
                                                         fused=self._fast_kernels or None)
            self.buffers[agent_id] = make_replay(config, agent, agent_id)
            self._params[agent_id] = list(net.parameters())
            self._forward[agent_id] = ((direct_forward(net), direct_forward(target)) if config.backend == "fast"
                                       else (net, target))
        self.learning_starts = max(config.min_replay_size, config.batch_size)
        self.train_steps = 0
        """Optimizer steps of all agents together; times the target syncs."""
        self.env_steps = 0
        self.steps_since_update = 0
        self._losses: dict[str, list[torch.Tensor]] = {a: [] for a in agent.networks}
        self._q: dict[str, list[torch.Tensor]] = {a: [] for a in agent.networks}

    # -- experience --------------------------------------------------------------------------------
    def _store(self, experience: Transitions) -> int:
        """Put the live rows into each agent's replay; returns the env steps this batch represents."""
        stepped = np.zeros(len(experience.episode_ended), dtype=bool)
        for agent_id, buffer in self.buffers.items():
            alive = np.asarray(experience.alive[agent_id], dtype=bool)
            stepped |= alive
            rows = np.flatnonzero(alive)
            if len(rows) == 0:
                continue
            select = slice(None) if len(rows) == len(alive) else rows  # a slice keeps views, no copies
            obs = observations.index(experience.obs[agent_id], select)
            next_obs = observations.index(experience.next_obs[agent_id], select)
            if self.state_dim is not None:
                check_encoded(obs.reshape(len(rows), -1), self.state_dim, agent_id, "observation")
                check_encoded(next_obs.reshape(len(rows), -1), self.state_dim, agent_id, "next observation")
            args = (obs, experience.actions[agent_id][select], experience.rewards[agent_id][select], next_obs,
                    experience.terminated[agent_id][select])  # truncation keeps the bootstrap
            if isinstance(buffer, FrameReplay | PartsReplay):
                buffer.add(*args, env_ids=rows)
            else:
                buffer.add(*args)
        return int(stepped.sum())

    def learn(self, experience: Transitions) -> dict[str, float]:
        steps = self._store(experience)
        self.env_steps += steps
        self.steps_since_update += steps
        config = self.config
        updated = False
        while self.steps_since_update >= config.train_frequency:
            self.steps_since_update -= config.train_frequency
            for _ in range(config.gradient_steps):
                for agent_id in self.buffers:
                    if len(self.buffers[agent_id]) >= self.learning_starts:
                        self._optimize(agent_id)
                        updated = True
        return self._metrics() if updated else {}

    # -- the update --------------------------------------------------------------------------------
    def _tensor(self, array: Any) -> Any:
        if isinstance(array, dict | tuple):  # Dict/Tuple observations: a tensor per part
            return observations.tree_map(self._tensor, array)
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        return tensor if self._on_cpu else tensor.to(self.device, non_blocking=True)

    def _optimize(self, agent_id: str) -> None:
        self.agent.threads.for_learning()
        config = self.config
        batch = self.buffers[agent_id].sample(config.batch_size, self.rng)
        obs, next_obs = self._tensor(batch["obs"]), self._tensor(batch["next_obs"])
        actions = self._tensor(batch["actions"]).long()
        rewards, terminated = self._tensor(batch["rewards"]), self._tensor(batch["terminated"])
        online, target = self._forward[agent_id]
        with torch.no_grad():
            # rlf.masking: the bootstrap takes the best action the next state allows
            next_mask = next_obs[ACTION_MASK_KEY] if agent_id in self.agent.masked else None
            next_target = mask_logits(target(next_obs), next_mask)
            if config.double_dqn:
                chosen = mask_logits(online(next_obs), next_mask).argmax(dim=1, keepdim=True)
                next_value = next_target.gather(1, chosen).squeeze(1)
            else:
                next_value = next_target.max(dim=1).values
            td_target = config.reward_scale * rewards + config.gamma * (1.0 - terminated) * next_value
        q = online(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
        loss = functional.smooth_l1_loss(q, td_target)
        params = self._params[agent_id]
        for param in params:  # what optimizer.zero_grad(set_to_none=True) does, without its profiler scope
            param.grad = None
        loss.backward()
        nn.utils.clip_grad_norm_(params, config.max_grad_norm, foreach=self._fast_kernels or None)
        self.optimizers[agent_id].step()
        self._losses[agent_id].append(loss.detach())
        self._q[agent_id].append(q.detach().mean())
        self.train_steps += 1
        if self.train_steps % config.target_update_interval == 0:
            self.sync_targets()

    def sync_targets(self) -> None:
        for agent_id, target in self.targets.items():
            target.load_state_dict(self.agent.networks[agent_id].state_dict())

    def _metrics(self) -> dict[str, float]:
        metrics: dict[str, float] = {"train_steps": float(self.train_steps)}
        multi = len(self.buffers) > 1
        for agent_id in self.buffers:
            losses, qs = self._losses[agent_id], self._q[agent_id]
            if not losses:
                continue
            suffix = f"/{agent_id}" if multi else ""
            # one device sync per call, not one per gradient step
            metrics[f"loss{suffix}"] = float(torch.stack(losses).mean())
            metrics[f"q_mean{suffix}"] = float(torch.stack(qs).mean())
            losses.clear()
            qs.clear()
        return metrics

    # -- state -------------------------------------------------------------------------------------
    def weights(self) -> StateTree:
        return self.agent.weights()

    def worker_init(self) -> None:
        set_threads(1)  # forked actors that use torch's inherited thread pool can deadlock

    def state_dict(self) -> StateTree:
        state: StateTree = {
            "targets": {a: to_numpy_tree(t.state_dict()) for a, t in self.targets.items()},
            "optimizers": {a: optimizer_state(o) for a, o in self.optimizers.items()},
            "train_steps": self.train_steps, "env_steps": self.env_steps,
            "steps_since_update": self.steps_since_update,
            "rng": self.rng.bit_generator.state, "torch_rng": torch_rng_state(),
        }
        if self.save_replay:  # run.save_replay
            state["replay"] = {a: b.state_dict() for a, b in self.buffers.items()}
        return state

    def load_state_dict(self, state: StateTree) -> None:
        for agent_id, target in self.targets.items():
            target.load_state_dict(to_torch_tree(state["targets"][agent_id], self.device))
            load_optimizer_state(self.optimizers[agent_id], state["optimizers"][agent_id])
        self.train_steps = int(state["train_steps"])
        self.env_steps = int(state["env_steps"])
        self.steps_since_update = int(state["steps_since_update"])
        self.rng.bit_generator.state = state["rng"]
        set_torch_rng_state(state["torch_rng"])
        for agent_id, replay in (state.get("replay") or {}).items():
            if agent_id in self.buffers:
                self.buffers[agent_id].load_state_dict(replay)

"""The update, and how asynchronous workers share it.

Each worker process (forked by the core's on-policy strategy when ``async_workers > 0``) collects
n-step rollouts with its own envs and seed, computes the loss and gradients on its own, and applies
them to the ONE model: parameters, Adam's moments and step counts, and the return statistics are
placed in shared memory here, before the fork. Gradients stay private to each worker. Only the
short optimizer step and statistics update run under a lock (a consistent Adam step per update);
acting, the forward and backward passes run in parallel, reading parameters other workers may be
changing, as in the original A3C.

With the defaults the core hands over, per agent and step t of a rollout, n-step returns cut at
episode ends (bootstrapped from the final observation on truncation, not on termination) and
``advantages = returns - V(s_t)``.
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import torch
from rlf_plugin_actor_critic.learner import summarize

from rlf import BuildContext, Learner, Rollout, StateTree
from rlf.torch_utils import load_optimizer_state, optimizer_state

from .model import RETURN_CLIP, A3CAgent, holding


class A3CLearner(Learner):
    def __init__(self, context: BuildContext, agent: A3CAgent):
        self.agent = agent
        self.context = context
        self.config = config = context.config
        # One Adam per agent (independent learners), shared by every worker.
        self.optimizers = {agent_id: torch.optim.Adam(net.parameters(), lr=config.lr)
                           for agent_id, net in agent.nets.items()}
        self._updates = torch.zeros((), dtype=torch.int64)
        self.lock = None
        if config.async_workers:
            agent.share_memory()
            self._share_optimizer_state()
            self._updates.share_memory_()
            self.lock = mp.get_context("fork").Lock()
            agent.update_lock = self.lock

    def _share_optimizer_state(self) -> None:
        # Adam creates its state lazily at the first step, which would happen in a worker, in private
        # memory; so create it now (as Adam would) and move it to shared memory.
        for optimizer in self.optimizers.values():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    state = optimizer.state[param]
                    if not state:
                        state["step"] = torch.tensor(0.0)
                        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    for value in state.values():
                        if isinstance(value, torch.Tensor):
                            value.share_memory_()

    @property
    def updates(self) -> int:
        """Updates applied to the shared model, by every worker together."""
        return int(self._updates)

    def worker_init(self) -> None:
        # Forked workers that use torch's inherited thread pool can deadlock; one thread each is also
        # the fastest for these small networks. The core set context.seed to this worker's own seed.
        torch.set_num_threads(1)
        torch.manual_seed(self.context.seed)
        self.agent.generator.manual_seed(self.context.seed)

    def learn(self, rollout: Rollout) -> dict[str, float]:
        per_agent: dict[str, dict[str, float]] = {}
        for agent_id in self.agent.agent_ids:
            alive = rollout.alive[agent_id].reshape(-1).astype(bool)
            if not alive.any():
                continue
            obs = rollout.obs[agent_id]
            obs = obs.reshape(-1, *obs.shape[2:])[alive]
            actions = rollout.actions[agent_id].reshape(-1)[alive] - self.agent.action_starts[agent_id]
            advantages = rollout.advantages[agent_id].reshape(-1)[alive]
            returns = rollout.returns[agent_id].reshape(-1)[alive]
            per_agent[agent_id] = self._update(agent_id, obs, actions, advantages, returns)
        with holding(self.lock):
            self._updates += 1
        return summarize(per_agent, multi_agent=len(self.agent.agent_ids) > 1)

    def _update(self, agent_id: str, obs: np.ndarray, actions: np.ndarray, advantages: np.ndarray,
                returns: np.ndarray) -> dict[str, float]:
        normalizer = self.agent.normalizers.get(agent_id)
        if normalizer is not None:
            # The critic learns standardised returns (it answers in reward units through the same
            # statistics); advantages are divided by the same std, which keeps the entropy bonus's
            # weight meaningful whatever the reward scale.
            with holding(self.lock):
                self.agent.observe_returns(agent_id, returns)
                targets = normalizer.normalize(returns)
                std = normalizer.std
            advantages = np.clip(advantages / std, -RETURN_CLIP, RETURN_CLIP)
        else:
            targets = returns
        device = self.agent.device
        net = self.agent.nets[agent_id]
        logits, values = net(self.agent.inputs(agent_id, obs))
        log_probs = torch.log_softmax(logits, dim=-1)
        taken = log_probs.gather(1, torch.as_tensor(actions, dtype=torch.int64, device=device)[:, None]).squeeze(1)
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1).mean()
        policy_loss = -(taken * torch.as_tensor(advantages, dtype=torch.float32, device=device)).mean()
        value_loss = (values - torch.as_tensor(targets, dtype=torch.float32, device=device)).pow(2).mean()
        loss = policy_loss + self.config.value_coef * value_loss - self.config.entropy_coef * entropy
        optimizer = self.optimizers[agent_id]
        optimizer.zero_grad(set_to_none=True)  # a worker's gradients live in its own memory
        loss.backward()
        # An infinite bound clips nothing and still measures the norm.
        grad_norm = torch.nn.utils.clip_grad_norm_(net.parameters(), self.config.max_grad_norm or float("inf"))
        with holding(self.lock):
            optimizer.step()
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
                "grad_norm": grad_norm.item()}

    def state_dict(self, include_replay: bool = True) -> StateTree:
        with holding(self.lock):
            return {"optimizers": {a: optimizer_state(opt) for a, opt in self.optimizers.items()},
                    "updates": self.updates}

    def load_state_dict(self, state: StateTree) -> None:
        for agent_id, optimizer in self.optimizers.items():
            load_optimizer_state(optimizer, state["optimizers"][agent_id])
        if self.lock is not None:
            self._share_optimizer_state()  # loading replaced the state tensors with private ones
        self._updates.fill_(int(state["updates"]))

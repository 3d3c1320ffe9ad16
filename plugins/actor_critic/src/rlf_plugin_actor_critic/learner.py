"""The update: policy gradient on the core's TD advantages, squared error on its returns, entropy bonus.

With the defaults (one env step per update, ``gae_lambda = 0``) the core hands over, per agent,
``advantages = r + gamma * V(s') * (1 - terminated) - V(s)`` and ``returns = r + gamma * V(s')``
(the bootstrap kept on truncation, from the final observation): the one-step TD error and target of
the classic online actor-critic.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from rlf import Learner, Rollout, StateTree, observations
from rlf.nn.torch_utils import load_optimizer_state, optimizer_state

from .config import ActorCriticConfig
from .model import RETURN_CLIP, ActorCriticAgent


class ActorCriticLearner(Learner):
    def __init__(self, agent: ActorCriticAgent, config: ActorCriticConfig):
        self.agent = agent
        self.config = config
        # One optimizer per agent (independent learners); decay only on the actor's weights, and
        # decoupled from the gradient: coupled L2 (Adam's weight_decay) at 1e-3 outweighs the small early
        # policy gradients once Adam rescales them, and kept the policy near uniform for ~40k steps on
        # the sparse predator-prey grid (benchmarks/actor_critic_family.py measures both).
        self.optimizers = {agent_id: self.make_optimizer(net) for agent_id, net in agent.nets.items()}
        self.updates = 0

    def make_optimizer(self, net: torch.nn.Module) -> torch.optim.Optimizer:
        """One learning rate for actor and critic; rlf-plugin-a2c overrides this with one each."""
        return torch.optim.AdamW([
            {"params": net.actor.parameters(), "weight_decay": self.config.actor_weight_decay},
            {"params": net.critic.parameters(), "weight_decay": 0.0},
        ], lr=self.config.lr)

    def learn(self, rollout: Rollout) -> dict[str, float]:
        per_agent: dict[str, dict[str, float]] = {}
        for agent_id in self.agent.agent_ids:
            alive = rollout.alive[agent_id].reshape(-1).astype(bool)
            if not alive.any():
                continue
            obs = observations.index(observations.merge_rows(rollout.obs[agent_id]), alive)
            actions = rollout.actions[agent_id].reshape(-1)[alive] - self.agent.action_starts[agent_id]
            advantages = rollout.advantages[agent_id].reshape(-1)[alive]
            returns = rollout.returns[agent_id].reshape(-1)[alive]
            per_agent[agent_id] = self._update(agent_id, obs, actions, advantages, returns)
        with self._shared():
            self.updates += 1
        return summarize(per_agent, multi_agent=len(self.agent.agent_ids) > 1)

    def _update(self, agent_id: str, obs: np.ndarray, actions: np.ndarray, advantages: np.ndarray,
                returns: np.ndarray) -> dict[str, float]:
        normalizer = self.agent.normalizers.get(agent_id)
        if normalizer is not None:
            # The critic learns standardised returns (it answers in reward units through the same
            # statistics); advantages are divided by the same std, which keeps the entropy bonus's
            # weight meaningful whatever the reward scale.
            with self._shared():
                self.agent.observe_returns(agent_id, returns)
                targets = normalizer.normalize(returns)
                std = normalizer.std
            advantages = np.clip(advantages / std, -RETURN_CLIP, RETURN_CLIP)
        else:
            targets = returns
        device = self.agent.device
        net = self.agent.nets[agent_id]
        logits, values = net(self.agent.inputs(agent_id, obs))
        logits = self.agent.allowed(agent_id, logits, obs)
        log_probs = torch.log_softmax(logits, dim=-1)
        taken = log_probs.gather(1, torch.as_tensor(actions, dtype=torch.int64, device=device)[:, None]).squeeze(1)
        entropy = -(log_probs.exp() * log_probs).sum(dim=-1).mean()
        policy_loss = -(taken * torch.as_tensor(advantages, dtype=torch.float32, device=device)).mean()
        value_loss = (values - torch.as_tensor(targets, dtype=torch.float32, device=device)).pow(2).mean()
        loss = policy_loss + self.config.value_coef * value_loss - self.config.entropy_coef * entropy
        optimizer = self.optimizers[agent_id]
        optimizer.zero_grad(set_to_none=True)  # gradients stay private, even to an A3C worker
        loss.backward()
        # An infinite bound clips nothing and still measures the norm.
        grad_norm = torch.nn.utils.clip_grad_norm_(net.parameters(), self.config.max_grad_norm or float("inf"))
        with self._shared():
            optimizer.step()
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item(),
                "grad_norm": grad_norm.item()}

    def _shared(self) -> contextlib.AbstractContextManager:
        """Held around what several processes may share: the return statistics, the optimizer step,
        the update count (rlf-plugin-a3c's workers hold a lock here; a single process holds nothing)."""
        return contextlib.nullcontext()

    def state_dict(self) -> StateTree:
        with self._shared():
            return {"optimizers": {a: optimizer_state(opt) for a, opt in self.optimizers.items()},
                    "updates": self.updates}

    def load_state_dict(self, state: StateTree) -> None:
        for agent_id, optimizer in self.optimizers.items():
            load_optimizer_state(optimizer, state["optimizers"][agent_id])
        self.updates = int(state["updates"])


def summarize(per_agent: dict[str, dict[str, float]], multi_agent: bool) -> dict[str, float]:
    """Means over agents under the plain names, plus ``name/agent`` columns in multi-agent runs."""
    if not per_agent:
        return {}
    out = {name: float(np.mean([m[name] for m in per_agent.values()])) for name in next(iter(per_agent.values()))}
    if multi_agent:
        out.update({f"{name}/{agent_id}": value for agent_id, m in per_agent.items() for name, value in m.items()})
    return out

"""REINFORCE's agent and learner, and the two builders the core calls when a run starts."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf import Acting, Agent, AgentArrays, BuildContext, IncompatibleError, Learner, Rollout, StateTree
from rlf.nn.torch_utils import (
    load_optimizer_state,
    optimizer_state,
    resolve_device,
    to_numpy_tree,
    to_torch_tree,
)


def policy_network(observation_space: spaces.Space, action_space: spaces.Space, hidden: int) -> nn.Module:
    # IncompatibleError: the CLI prints one line and exits 2, and no run is left behind to resume
    if not isinstance(observation_space, spaces.Box):
        raise IncompatibleError(f"reinforce reads Box observations, not {observation_space}; choose another environment")
    if not isinstance(action_space, spaces.Discrete):
        raise IncompatibleError(f"reinforce needs discrete actions, not {action_space}; choose another environment")
    inputs = int(np.prod(observation_space.shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(inputs, hidden), nn.Tanh(), nn.Linear(hidden, int(action_space.n)))


class ReinforceAgent(Agent):
    """One policy network per agent id; samples actions from its softmax."""

    def __init__(self, context: BuildContext):
        torch.manual_seed(context.seed)
        self.device = resolve_device(context.device)
        spec, hidden = context.env_spec, context.config.hidden
        self.policies = {a: policy_network(spec.observation_spaces[a], spec.action_spaces[a], hidden).to(self.device)
                         for a in spec.agent_ids}
        self.generator = torch.Generator().manual_seed(context.seed)  # the action sampler's own stream

    def distribution(self, agent_id: str, obs: np.ndarray) -> torch.distributions.Categorical:
        x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
        return torch.distributions.Categorical(logits=self.policies[agent_id](x))

    @torch.no_grad()
    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        actions, extras = {}, {}
        for agent_id, batch in obs.items():
            probs = self.distribution(agent_id, batch).probs.cpu()
            if explore:
                chosen = torch.multinomial(probs, 1, generator=self.generator).squeeze(1)
            else:
                chosen = probs.argmax(dim=1)
            actions[agent_id] = chosen.numpy()
            # No critic: a value of 0 makes the core's returns (gae_lambda = 1) the discounted returns-to-go.
            extras[agent_id] = {"value": np.zeros(len(batch), dtype=np.float32)}
        return Acting(actions, extras)

    def value(self, obs: AgentArrays) -> AgentArrays:
        return {agent_id: np.zeros(len(batch), dtype=np.float32) for agent_id, batch in obs.items()}

    def state_dict(self) -> StateTree:
        return {"policies": {a: to_numpy_tree(p.state_dict()) for a, p in self.policies.items()},
                "generator": self.generator.get_state().numpy()}

    def load_state_dict(self, state: StateTree) -> None:
        for agent_id, policy in self.policies.items():
            policy.load_state_dict(to_torch_tree(state["policies"][agent_id], self.device))
        self.generator.set_state(torch.as_tensor(np.asarray(state["generator"], dtype=np.uint8)))


class ReinforceLearner(Learner):
    """One gradient step per rollout: raise the log-probability of actions in proportion to their return."""

    def __init__(self, context: BuildContext, agent: ReinforceAgent):
        self.agent = agent
        self.optimizers = {a: torch.optim.Adam(p.parameters(), lr=context.config.lr)
                           for a, p in agent.policies.items()}

    def learn(self, rollout: Rollout) -> dict[str, float]:
        losses = []
        for agent_id, optimizer in self.optimizers.items():
            alive = rollout.alive[agent_id].reshape(-1)  # (T, N) -> (T*N,): steps this agent took part in
            obs = rollout.obs[agent_id]
            obs = obs.reshape(-1, *obs.shape[2:])[alive]
            actions = torch.as_tensor(rollout.actions[agent_id].reshape(-1)[alive], device=self.agent.device)
            returns = torch.as_tensor(rollout.returns[agent_id].reshape(-1)[alive], device=self.agent.device)
            returns = (returns - returns.mean()) / (returns.std() + 1e-8)
            log_prob = self.agent.distribution(agent_id, obs).log_prob(actions)
            loss = -(log_prob * returns).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return {"policy_loss": float(np.mean(losses))}

    def state_dict(self) -> StateTree:
        return {"optimizers": {a: optimizer_state(o) for a, o in self.optimizers.items()}}

    def load_state_dict(self, state: StateTree) -> None:
        for agent_id, optimizer in self.optimizers.items():
            load_optimizer_state(optimizer, state["optimizers"][agent_id])


def build_agent(context: BuildContext) -> ReinforceAgent:
    return ReinforceAgent(context)


def build_learner(context: BuildContext, agent: ReinforceAgent) -> ReinforceLearner:
    return ReinforceLearner(context, agent)

"""The networks and the acting agent: an independent actor MLP and critic MLP for every agent id."""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlf import (
    Acting,
    Agent,
    AgentArrays,
    CheckpointError,
    EnvSpec,
    IncompatibleError,
    PolicyExport,
    RunningNormalizer,
    StateTree,
)
from rlf.masking import ACTION_MASK_KEY, has_mask
from rlf.nn import ObservationEncoder, as_tensors, mask_logits, mlp
from rlf.nn.torch_utils import to_numpy_tree, to_torch_tree

from .config import ActorCriticConfig

RETURN_CLIP = 10.0
"""Bound on normalised returns and advantages: a safety net while the statistics are young."""
RETURN_MIN_STD = 1e-2
"""Floor of the return std, so a stream of equal returns (all step costs) does not divide by ~0."""


class ActorCriticNet(nn.Module):
    """Separate actor and critic, so the actor's weight decay and the critic's targets stay apart."""

    def __init__(self, n_inputs: int, n_actions: int, hidden: list[int]):
        super().__init__()
        # orthogonal init keeps activations well scaled; a tiny policy-output gain starts near uniform
        self.actor = mlp(n_inputs, hidden, n_actions, activation=nn.Tanh, gain=math.sqrt(2), out_gain=0.01)
        self.critic = mlp(n_inputs, hidden, 1, activation=nn.Tanh, gain=math.sqrt(2), out_gain=1.0)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor(x), self.critic(x).squeeze(-1)


class ActorCriticAgent(Agent):
    """Samples from each agent's categorical policy; ``value`` answers in reward units (the critic's
    output de-normalised with that agent's return statistics), which is what the core's GAE needs.

    rlf-plugin-a2c and rlf-plugin-a3c act with this agent too (they differ in how they learn)."""

    algorithm = "actor-critic"
    """Named in errors; subclasses in other plugins set their own."""

    def __init__(self, spec: EnvSpec, config: ActorCriticConfig, seed: int, device: torch.device):
        self.device = device
        self.agent_ids = spec.agent_ids
        self.encoders: dict[str, ObservationEncoder] = {}
        self.nets: dict[str, ActorCriticNet] = {}
        torch.manual_seed(seed)
        for agent_id in spec.agent_ids:
            action_space = spec.action_spaces[agent_id]
            if not isinstance(action_space, spaces.Discrete):
                raise IncompatibleError(f"{self.algorithm} needs Discrete actions; agent {agent_id!r} has {action_space}")
            # one-hot ids; Box dimensions with finite bounds onto [-1, 1], so grid offsets of +-9 do not
            # saturate tanh units
            encoder = ObservationEncoder(spec.observation_spaces[agent_id], "mlp", bounds=True,
                                         name=f"{self.algorithm}'s agent {agent_id!r}").to(device)
            self.encoders[agent_id] = encoder
            self.nets[agent_id] = ActorCriticNet(encoder.features, int(action_space.n), config.hidden_sizes).to(device)
        self.action_starts = {a: int(spec.action_spaces[a].start) for a in spec.agent_ids}
        self.masked = {a for a in spec.agent_ids  # rlf.masking: an "action_mask" observation part
                       if has_mask(spec.observation_spaces[a], spec.action_spaces[a], f"{self.algorithm}'s agent {a!r}")}
        self.normalizers = ({a: RunningNormalizer(clip=RETURN_CLIP, min_std=RETURN_MIN_STD) for a in spec.agent_ids}
                            if config.normalize_returns else {})
        self.generator = torch.Generator().manual_seed(seed)

    def inputs(self, agent_id: str, obs) -> torch.Tensor:
        if isinstance(obs, dict | tuple):  # Dict/Tuple observations: a tensor per part (a MultiInputEncoder)
            return self.encoders[agent_id](as_tensors(obs, self.device))
        return self.encoders[agent_id](torch.as_tensor(np.asarray(obs), device=self.device))

    def allowed(self, agent_id: str, logits: torch.Tensor, obs) -> torch.Tensor:
        """The logits with the actions the observations' mask forbids made impossible (no mask: unchanged):
        acting and the update use the same masked distribution."""
        if agent_id not in self.masked:
            return logits
        return mask_logits(logits, torch.as_tensor(np.asarray(obs[ACTION_MASK_KEY]), device=logits.device))

    def observe_returns(self, agent_id: str, returns: np.ndarray) -> None:
        """Fold returns into this agent's statistics and rescale the critic's output layer so that
        its answers in reward units stay exactly what they were (PopArt's output preservation).

        Without the rescaling every change of the statistics would shift all values at once: on
        CartPole that made the one-step actor-critic collapse to a one-action policy mid-training.
        """
        normalizer = self.normalizers[agent_id]
        old_mean, old_std = normalizer.mean, normalizer.std
        normalizer.update(returns)
        new_mean, new_std = normalizer.mean, normalizer.std
        head = self.nets[agent_id].critic[-1]
        with torch.no_grad():
            head.weight.mul_(float(old_std / new_std))
            head.bias.mul_(float(old_std / new_std)).add_(float((old_mean - new_mean) / new_std))

    def to_reward_units(self, agent_id: str, critic_out: np.ndarray) -> np.ndarray:
        normalizer = self.normalizers.get(agent_id)
        return normalizer.denormalize(critic_out) if normalizer is not None else critic_out

    @torch.no_grad()
    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        actions, extras = {}, {}
        for agent_id, batch in obs.items():
            logits, value = self.nets[agent_id](self.inputs(agent_id, batch))
            logits = self.allowed(agent_id, logits, batch)
            log_probs = torch.log_softmax(logits, dim=-1).cpu()
            if explore:  # sampled on the CPU from this agent's own generator: reproducible on any device
                chosen = torch.multinomial(log_probs.exp(), 1, generator=self.generator).squeeze(1)
            else:
                chosen = log_probs.argmax(dim=-1)
            actions[agent_id] = chosen.numpy() + self.action_starts[agent_id]
            extras[agent_id] = {
                "log_prob": log_probs.gather(1, chosen[:, None]).squeeze(1).numpy(),
                "value": self.to_reward_units(agent_id, value.cpu().numpy()).astype(np.float32),
            }
        return Acting(actions, extras)

    def export_policy(self, agent_id: str) -> PolicyExport:
        policy = nn.Sequential(self.encoders[agent_id], self.nets[agent_id].actor)
        return PolicyExport(copy.deepcopy(policy).cpu(), "categorical")

    @torch.no_grad()
    def value(self, obs: AgentArrays) -> AgentArrays:
        return {agent_id: self.to_reward_units(
                    agent_id, self.nets[agent_id].critic(self.inputs(agent_id, batch)).squeeze(-1).cpu().numpy()
                ).astype(np.float32)
                for agent_id, batch in obs.items()}

    def state_dict(self) -> StateTree:
        return {"nets": {a: to_numpy_tree(net.state_dict()) for a, net in self.nets.items()},
                "normalizers": {a: n.state_dict() for a, n in self.normalizers.items()},
                "generator": self.generator.get_state().numpy()}

    def load_state_dict(self, state: StateTree) -> None:
        try:
            for agent_id, net in self.nets.items():
                net.load_state_dict(to_torch_tree(state["nets"][agent_id], self.device))
            for agent_id, normalizer in self.normalizers.items():
                normalizer.load_state_dict(state["normalizers"][agent_id])
            self.generator.set_state(torch.as_tensor(np.asarray(state["generator"], dtype=np.uint8)))
        except (KeyError, RuntimeError, ValueError) as exc:
            problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CheckpointError(f"this checkpoint does not fit an {self.algorithm} agent built with the current settings "
                                  f"({type(exc).__name__}: {problem}); load it with the hidden_sizes, "
                                  "normalize_returns and environment it was trained with") from None

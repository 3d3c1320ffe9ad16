"""The curiosity module: a feature encoder, an inverse model and a forward model (Pathak et al. 2017)."""

from __future__ import annotations

import torch
from gymnasium import spaces
from torch import nn
from torch.nn import functional as F

from rlf.nn import ObservationEncoder, conv_stack, flat_size, mlp

PAPER_CONVS = ((32, 3, 2, 1),) * 4
"""The paper's image encoder: four 3x3 stride-2 convolutions of 32 channels (with ELU)."""


class ICMModule(nn.Module):
    """phi(s); inverse: (phi(s), phi(s')) -> a; forward: (phi(s), a) -> phi(s'). Actions are 0-based ids."""

    def __init__(self, observation_space: spaces.Space, n_actions: int, network: str, feature_dim: int,
                 hidden_size: int):
        super().__init__()
        # PPO's observation encoding with the same ``network`` setting: ICM sees what the policy sees
        self.inputs = ObservationEncoder(observation_space, network)
        self.n_actions = n_actions
        if self.inputs.image:
            self.encoder = conv_stack(self.inputs.shape[0], PAPER_CONVS, activation=nn.ELU)
            feature_dim = flat_size(self.encoder, self.inputs.shape)
        else:
            self.encoder = mlp(self.inputs.features, [hidden_size], feature_dim, activation=nn.ELU)
        self.feature_dim = feature_dim
        self.inverse = mlp(2 * feature_dim, [hidden_size], n_actions)
        self.forward_model = mlp(feature_dim + n_actions, [hidden_size], feature_dim)

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.inputs(obs))

    def _predict_next(self, phi: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        one_hot = F.one_hot(actions.long().reshape(-1), self.n_actions).float()
        return self.forward_model(torch.cat([phi, one_hot], dim=1))

    def forward_error(self, obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """Per sample 1/2 ||forward(phi(s), a) - phi(s')||^2, the curiosity signal."""
        return 0.5 * (self._predict_next(self.features(obs), actions) - self.features(next_obs)).pow(2).sum(dim=1)

    def losses(self, obs: torch.Tensor, next_obs: torch.Tensor, actions: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean forward and inverse losses over the batch; both train the encoder, as in the paper."""
        phi, phi_next = self.features(obs), self.features(next_obs)
        logits = self.inverse(torch.cat([phi, phi_next], dim=1))
        inverse = F.cross_entropy(logits, actions.long().reshape(-1))
        forward = 0.5 * (self._predict_next(phi, actions) - phi_next).pow(2).sum(dim=1).mean()
        return forward, inverse

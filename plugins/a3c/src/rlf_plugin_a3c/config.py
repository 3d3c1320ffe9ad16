"""A3C's configuration. ``async_workers`` belongs to this plugin's ``async-workers`` strategy (which
forks the workers); ``rollout_steps`` (the n of the n-step return), ``gamma`` and ``gae_lambda`` come
from ``rlf.OnPolicyConfig``: each worker collects its rollouts and computes the n-step advantages
with them."""

from __future__ import annotations

from pydantic import Field, model_validator
from rlf_plugin_actor_critic.config import ActorCriticFamilyConfig

import rlf


class AsyncWorkersConfig(rlf.OnPolicyConfig):
    """What the ``async-workers`` strategy reads: the on-policy settings plus the worker count."""

    async_workers: int = Field(
        0, ge=0, le=64,
        description="Asynchronous worker processes that collect and learn on a shared model (0 = synchronous).",
    )

    @model_validator(mode="after")
    def _one_kind_of_overlap(self):
        # the workers already learn while the others collect; overlap_update is the synchronous strategy's
        if self.async_workers and self.overlap_update:
            raise ValueError("overlap_update=true applies to the synchronous strategy (async_workers=0); the "
                             "async workers already learn while others collect: set one of them")
        return self


class A3CConfig(ActorCriticFamilyConfig, AsyncWorkersConfig):
    """Asynchronous n-step advantage actor-critic (PPAGE's A3C): workers update one shared model."""

    async_workers: int = Field(
        4, ge=0, le=64,
        description="Worker processes, each with its own envs and seed, updating the shared model (0 = synchronous).")
    rollout_steps: int = Field(
        5, ge=1, le=100_000, description="n: env steps per env in each update and in each n-step return.")
    gae_lambda: float = Field(
        1.0, ge=0.0, le=1.0,
        description="1 = n-step returns bootstrapped at the rollout's end (A3C); below 1 = GAE over the rollout.")
    lr: float = Field(1e-3, gt=0.0, le=1.0, description="Learning rate of the shared Adam (actor and critic).")
    normalize_returns: bool = Field(
        True,
        description="Critic learns returns standardised by shared float64 statistics; advantages scaled alike.")
    torch_threads: int = Field(
        1, ge=0, le=1024,
        description="CPU threads torch uses in the main process (0 = torch's default); workers always use 1.")

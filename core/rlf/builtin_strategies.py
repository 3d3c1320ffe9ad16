"""The core's own strategy families, ``on-policy`` and ``off-policy``, registered through the same hook
a third-party strategy (recurrent PPO, an offline learner, A3C's workers) uses. Named by string so
discovery never imports the training machinery."""

from __future__ import annotations

from .config import OffPolicyConfig, OnPolicyConfig
from .hookspecs import RegisterStrategy, hookimpl
from .plugins import API_VERSION

RLF_API_VERSION = API_VERSION


@hookimpl
def rlf_register_strategies(register: RegisterStrategy):
    register("on-policy", strategy="rlf.training.on_policy:OnPolicyStrategy", config=OnPolicyConfig,
             description="vectorized rollouts with GAE, one update per rollout")
    register("off-policy", strategy="rlf.training.off_policy:OffPolicyStrategy", config=OffPolicyConfig,
             description="every step's transitions to the learner, epsilon schedules, optional actor processes")

"""A third-party plugin written only against rlf's public API, as an outside author would: it adds a
collector, a strategy family and an algorithm that runs on that family (the tests load it through an
entry point, so nothing in the core knows it).

The entry module stays light; the collector and the strategy live in their own modules and are
named by string, so discovery imports neither Gymnasium nor the training machinery.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

import rlf


class CountingCollectorConfig(rlf.CollectorConfig):
    """Where the counting collector reports what it stepped."""

    report: Path | None = Field(None, description="JSON file written at close: envs built, steps, resets.")
    seed_offset: int = Field(0, ge=0, description="Added to every reset seed.")


class MonteCarloConfig(rlf.AlgorithmConfig):
    """What the monte-carlo strategy reads: rollouts scored by full discounted returns (no bootstrap
    inside an episode, lambda = 1)."""

    rollout_steps: int = Field(32, ge=1, le=10_000, description="Env steps per env before each update.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor.")


class LinearMCConfig(MonteCarloConfig):
    """The tests' linear policy, trained on the monte-carlo strategy."""

    lr: float = Field(0.01, gt=0, le=1, description="Step size.")


class ThirdPartyPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @rlf.hookimpl
    def rlf_register_collectors(self, register: rlf.RegisterCollector):
        register("counting", build_collector="third_party_collector:build_counting_collector",
                 config=CountingCollectorConfig, description="in-process envs that count their steps")

    @rlf.hookimpl
    def rlf_register_strategies(self, register: rlf.RegisterStrategy):
        register("monte-carlo", strategy="third_party_strategy:MonteCarloStrategy", config=MonteCarloConfig,
                 description="rollouts with Monte-Carlo returns (lambda = 1)")

    @rlf.hookimpl
    def rlf_register_algorithms(self, register: rlf.RegisterAlgorithm):
        register("linear-mc", build_agent="support:build_linear_agent", build_learner="support:build_linear_learner",
                 family="monte-carlo", config=LinearMCConfig)


plugin = ThirdPartyPlugin()

"""The monte-carlo strategy of ``third_party_plugin``: the core's rollout collection with lambda = 1,
on the core's ``BaseStrategy`` plumbing (envs from the run's collector, agent, learner, resume)."""

from __future__ import annotations

import rlf


class MonteCarloStrategy(rlf.BaseStrategy):
    family = "monte-carlo"

    def setup(self) -> None:
        super().setup()
        self.rollouts = 0

    def step(self, limit: int) -> rlf.StepResult:
        config = self.context.config
        steps = max(1, min(config.rollout_steps, -(-limit // self.envs.num_envs)))
        rollout, self.obs, episodes = rlf.collect_rollout(self.envs, self.agent, self.obs, steps, self.tracker,
                                                          config.gamma, 1.0)
        self.rollouts += 1
        metrics = self.learner.learn(rollout)
        metrics["mc_rollouts"] = float(self.rollouts)
        return rlf.StepResult(rollout.num_steps, metrics, episodes)

"""Off-policy: act, hand every step's transitions to the learner (which keeps the replay and learns
from samples), advance exploration per step and per finished episode."""

from __future__ import annotations

from ..interfaces import Transitions
from ..plugins import StrategyFamily
from .strategy import BaseStrategy, StepResult, average_metrics

CHUNK_ENV_STEPS = 64
"""Env steps per ``step()`` call, so the Trainer's bookkeeping is paid once per chunk, not per step."""


class OffPolicyStrategy(BaseStrategy):
    family = StrategyFamily.OFF_POLICY

    def step(self, limit: int) -> StepResult:
        envs, agent, learner, tracker = self.envs, self.agent, self.learner, self.tracker
        n = envs.num_envs
        iterations = max(1, min(-(-CHUNK_ENV_STEPS // n), -(-limit // n)))
        learned: list[dict[str, float]] = []
        episodes: list[dict[str, float]] = []
        obs = self.obs
        for _ in range(iterations):
            acting = agent.act(obs, explore=True)
            batch = envs.step(acting.actions)
            metrics = learner.learn(Transitions(obs, acting.actions, batch.rewards, batch.next_obs,
                                                batch.terminated, batch.truncated, batch.alive,
                                                batch.episode_ended))
            if metrics:
                learned.append(metrics)
            ended = batch.episode_ended
            if ended.any():
                episodes.extend(tracker.update(batch, agent.metrics()))
                agent.reset_state(ended)
                agent.on_progress(n, int(ended.sum()))
            else:
                tracker.update(batch)
                agent.on_progress(n, 0)
            obs = batch.obs
        self.obs = obs
        metrics = average_metrics(learned)
        metrics.update(agent.metrics())
        return StepResult(iterations * n, metrics, episodes)

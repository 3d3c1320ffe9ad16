"""Epsilon schedules for epsilon-greedy agents, advanced by the off-policy strategy."""

from __future__ import annotations

from rlf.config import ExplorationConfig


class EpsilonSchedule:
    """per_episode: ``eps = max(end, eps * decay)`` after each finished episode, so the first step
    of an episode uses the current value (as in PPAGE's predator-prey baselines). per_step: linear from start to end."""

    def __init__(self, config: ExplorationConfig):
        self.config = config
        self.value = config.start
        self.env_steps = 0
        self.episodes = 0

    def advance(self, env_steps: int, episodes_ended: int) -> float:
        self.env_steps += env_steps
        self.episodes += episodes_ended
        config = self.config
        if config.schedule == "per_step":
            fraction = min(1.0, self.env_steps / config.decay_steps)
            self.value = config.start + fraction * (config.end - config.start)
        elif episodes_ended and config.schedule == "per_episode":  # called every step: skip the no-op
            self.value = max(config.end, config.start * config.decay ** self.episodes)
        return self.value

    def state_dict(self) -> dict:
        return {"value": self.value, "env_steps": self.env_steps, "episodes": self.episodes}

    def load_state_dict(self, state: dict) -> None:
        self.value = float(state["value"])
        self.env_steps = int(state["env_steps"])
        self.episodes = int(state["episodes"])

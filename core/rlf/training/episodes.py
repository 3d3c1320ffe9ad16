"""Episode bookkeeping for strategies: per-env returns and lengths, the rows of episodes that ended,
and their averages for the logs.
"""

from __future__ import annotations

import numpy as np

from rlf.envs.base import StepBatch
from rlf.interfaces import StateTree

WIDENED_CACHE = 256
"""Read-only reward matrices the EpisodeTracker keeps a float64 copy of."""


class EpisodeTracker:
    """Per-env running returns and lengths; emits one row per finished episode."""

    def __init__(self, agent_ids: tuple[str, ...], num_envs: int, multi_agent: bool):
        self.agent_ids = agent_ids
        self.multi_agent = multi_agent
        self.returns = np.zeros((len(agent_ids), num_envs))
        self._wide: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        """id -> (a read-only float32 reward matrix a collector hands out again, it as float64)."""
        # lengths as (steps so far - step the episode started at): no per-step array update
        self.steps = 0
        self.started = [0] * num_envs
        self.episodes = 0
        self.dropped = 0
        """Episodes cut short by a restarted env worker (at least one step taken): left out of the
        stats, counted here."""

    def update(self, batch: StepBatch, extra: dict[str, float] | None = None) -> list[dict[str, float]]:
        """Add one env step's rewards; returns a row for each episode that ended in it (``length``,
        ``return``, per-agent ``return/<id>`` in a multi-agent env, the env's episode metrics and
        ``extra``). A strategy calls it once per step of all envs and passes the rows on in
        ``StepResult.episodes``."""
        self.steps += 1
        rewards = batch.reward_matrix
        # Adding float32 to the float64 sums costs three times a float64 addition (numpy's casting
        # loop), and at one env that is a good part of a step's bookkeeping: collectors that hand out
        # the same read-only matrices again (ParallelVector) get them widened once. Keeping the matrix
        # referenced keeps its id from being reused.
        wide = self._wide.get(id(rewards))
        if wide is not None and wide[0] is rewards:
            self.returns += wide[1]
        elif rewards.flags.writeable or len(self._wide) >= WIDENED_CACHE:
            self.returns += rewards
        else:
            widened = rewards.astype(np.float64)
            self._wide[id(rewards)] = (rewards, widened)
            self.returns += widened
        if not batch.ended_envs:
            return []
        rows = []
        for i in batch.ended_envs:
            if i in batch.dropped:
                # the dropped step itself was never taken: an episode that had just begun lost nothing
                if self.steps - 1 > self.started[i]:
                    self.dropped += 1
                self.started[i] = self.steps
                self.returns[:, i] = 0.0
                continue
            self.episodes += 1
            returns = self.returns[:, i].tolist()
            row: dict[str, float] = {"episode": float(self.episodes), "length": float(self.steps - self.started[i])}
            if self.multi_agent:
                for a, value in zip(self.agent_ids, returns, strict=True):
                    row[f"return/{a}"] = value
                row["return"] = sum(returns) / len(returns)
            else:
                row["return"] = returns[0]
            row.update(batch.episode_metrics.get(i, {}))
            if extra:
                row.update(extra)
            rows.append(row)
            self.started[i] = self.steps
            self.returns[:, i] = 0.0
        return rows

    def state_dict(self) -> StateTree:
        return {"episodes": self.episodes}

    def load_state_dict(self, state: StateTree) -> None:
        self.episodes = int(state["episodes"])

    def inflight_state(self) -> StateTree:
        """The episodes under way: per-env running returns and lengths (for an exact resume)."""
        return {"returns": self.returns.copy(), "lengths": [self.steps - start for start in self.started],
                "dropped": self.dropped}

    def load_inflight_state(self, state: StateTree) -> None:
        returns = np.asarray(state["returns"], dtype=self.returns.dtype)
        lengths = [int(length) for length in state["lengths"]]
        if returns.shape != self.returns.shape or len(lengths) != len(self.started):
            raise ValueError(f"episode accumulators for {returns.shape} agents x envs, the run has {self.returns.shape}")
        self.returns = returns
        self.steps = 0
        self.started = [-length for length in lengths]
        self.dropped = int(state["dropped"])

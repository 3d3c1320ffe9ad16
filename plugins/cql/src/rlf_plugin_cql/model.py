"""The joint Q-table and the agent that acts on its per-agent marginals."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping

import numpy as np
from rlf_plugin_iql import KeyCache, QTable, StateKeys, greedy, random_state, set_random_state

from rlf import Acting, Agent, AgentArrays, ConfigError, EpsilonSchedule, ExplorationConfig, StateTree

BYTES_PER_VALUE = 8


class CQLAgent(Agent):
    """One table for a group of agents (every agent, or one team in rlf-plugin-mixed).

    * joint state: every agent's state key, concatenated in agent-id order;
    * joint action: ``a0 * A^(n-1) + a1 * A^(n-2) + ... + a(n-1)`` (mixed radix if action counts differ);
    * acting: agent i takes the joint Q-row, reshaped to ``(A,) * n``, averaged over every axis but
      its own, and is epsilon-greedy on that marginal with random tie-breaking, independently of the
      others.
    """

    def __init__(self, agent_ids: Iterable[str], n_actions: Mapping[str, int], keys: StateKeys,
                 exploration: ExplorationConfig, seed: int, max_joint_actions: int, max_table_mib: int,
                 prefix: str = "algo."):
        self.agent_ids = tuple(agent_ids)
        self.shape = tuple(int(n_actions[a]) for a in self.agent_ids)
        joint = math.prod(self.shape)
        if joint > max_joint_actions:
            raise ConfigError(
                f"the joint table of {len(self.agent_ids)} agents needs {joint} Q-values per state "
                f"(actions {'x'.join(map(str, self.shape))}), above {prefix}max_joint_actions="
                f"{max_joint_actions}; use fewer learning agents (e.g. env.learners=predators) or raise "
                f"{prefix}max_joint_actions")
        row_bytes = joint * BYTES_PER_VALUE
        max_states = max(1, max_table_mib * 2**20 // row_bytes)
        self.table = QTable(joint, capacity=64, max_states=max_states,
                            full_hint=f"raise {prefix}max_table_mib (now {max_table_mib}) or use fewer agents")
        # (before, own, after) sizes: reshaping a row to them puts agent k's action on the middle axis.
        self._blocks = [(math.prod(self.shape[:k]), self.shape[k], math.prod(self.shape[k + 1:]))
                        for k in range(len(self.shape))]
        self.keys = KeyCache(keys)
        self.epsilon = EpsilonSchedule(exploration)
        self.rng = random.Random(seed)

    def joint_keys(self, obs: AgentArrays) -> list[tuple]:
        per_agent = [self.keys(a, obs[a]) for a in self.agent_ids]
        if len(per_agent) == 1:
            return per_agent[0]
        return [sum(parts, ()) for parts in zip(*per_agent, strict=True)]

    def joint_action(self, actions: Iterable[int]) -> int:
        index = 0
        for size, action in zip(self.shape, actions, strict=True):
            index = index * size + action
        return index

    def marginal(self, q: np.ndarray, k: int) -> np.ndarray:
        """Agent k's Q-values: the joint row averaged over every other agent's action."""
        before, own, after = self._blocks[k]
        if before == 1 and after == 1:
            return q
        return q.reshape(before, own, after).mean(axis=(0, 2))

    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        rng, epsilon, table = self.rng, self.epsilon.value if explore else 0.0, self.table
        keys = self.joint_keys(obs)
        chosen = np.empty((len(self.agent_ids), len(keys)), dtype=np.int64)
        for i, key in enumerate(keys):
            found = table.index.get(key)
            q = None if found is None else table.values[found]
            for k, n in enumerate(self.shape):
                if q is None or (epsilon and rng.random() < epsilon):
                    chosen[k, i] = int(rng.random() * n)
                else:
                    chosen[k, i] = greedy(self.marginal(q, k).tolist(), rng)
        return Acting({a: chosen[k] for k, a in enumerate(self.agent_ids)})

    def on_progress(self, env_steps: int, episodes_ended: int) -> None:
        self.epsilon.advance(env_steps, episodes_ended)

    @property
    def table_size(self) -> int:
        return len(self.table)

    def metrics(self) -> dict[str, float]:
        return {"epsilon": float(self.epsilon.value), "table_size": float(self.table_size)}

    def weights(self) -> StateTree:
        """Table and exploration, without the action RNG: what actor copies load (each keeps its stream)."""
        return {"agent_ids": list(self.agent_ids), "table": self.table.state_dict(),
                "epsilon": self.epsilon.state_dict()}

    def state_dict(self) -> StateTree:
        return {**self.weights(), "rng": random_state(self.rng)}

    def load_state_dict(self, state: StateTree) -> None:
        saved = tuple(state["agent_ids"])
        if saved != self.agent_ids:
            raise ValueError(f"checkpoint's joint table is over agents {list(saved)}, not {list(self.agent_ids)}")
        self.table.load_state_dict(state["table"])
        self.epsilon.load_state_dict(state["epsilon"])
        if "rng" in state:
            set_random_state(self.rng, state["rng"])

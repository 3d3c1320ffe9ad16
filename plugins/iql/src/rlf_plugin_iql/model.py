"""Lazily grown Q-tables and the epsilon-greedy agent that acts on them.

The building blocks here (``QTable``, ``StateKeys``, ``greedy``, the RNG helpers) are this plugin's
public API: rlf-plugin-cql and rlf-plugin-mixed build their tables from them.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

from rlf import Acting, Agent, AgentBatch, ConfigError, EpsilonSchedule, ExplorationConfig, StateTree

Key = Hashable


class StateKeys:
    """Turns a batch of observations (N, ...) into one hashable table key per row.

    The environment's ``encoder.hashable`` (``env_spec.metadata["encoder"]``) defines what a state is,
    through its ``hashable_batch`` where it has one (one call per batch, not per row); without an
    encoder, the observation's values themselves are the key.
    """

    def __init__(self, metadata: Mapping[str, Any] | None = None):
        encoder = (metadata or {}).get("encoder")
        self._batch = getattr(encoder, "hashable_batch", None)
        self._row = getattr(encoder, "hashable", None)

    def __call__(self, batch: np.ndarray) -> list[Key]:
        if self._batch is not None:
            return self._batch(batch)
        if self._row is not None:
            return [self._row(row) for row in batch]
        return [tuple(row) for row in batch.reshape(len(batch), -1).tolist()]


class QTable:
    """Q-values of the states seen so far: a dict from state key to a row of one growing matrix.

    Rows are appended in visiting order and never move, so a row number stays valid; the matrix
    doubles when full, which keeps appends amortised O(1) without a Python object per state.
    """

    def __init__(self, n_actions: int, capacity: int = 64, max_states: int | None = None,
                 full_hint: str = "use a coarser observation"):
        self.n_actions = n_actions
        self.index: dict[Key, int] = {}
        self.max_states = max_states
        self.full_hint = full_hint
        self.values = np.zeros((min(capacity, max_states or capacity), n_actions))

    def __len__(self) -> int:
        return len(self.index)

    def find(self, key: Key) -> int | None:
        return self.index.get(key)

    def row(self, key: Key) -> int:
        """The row of ``key``, added as zeros (an unvisited state) if it is new."""
        found = self.index.get(key)
        if found is not None:
            return found
        found = len(self.index)
        if found == len(self.values):
            self._grow(found)
        self.index[key] = found
        return found

    def _grow(self, size: int) -> None:
        if self.max_states is not None and size >= self.max_states:
            raise ConfigError(f"the Q-table is full: {size} states x {self.n_actions} values "
                              f"({size * self.n_actions * 8 / 2**20:.0f} MiB); {self.full_hint}")
        capacity = 2 * len(self.values)
        if self.max_states is not None:
            capacity = min(capacity, self.max_states)
        grown = np.zeros((capacity, self.n_actions))
        grown[:size] = self.values
        self.values = grown

    def q(self, key: Key) -> np.ndarray:
        """Q-values of ``key`` (zeros for an unvisited state); a copy, safe to keep."""
        found = self.index.get(key)
        return np.zeros(self.n_actions) if found is None else self.values[found].copy()

    def max_q(self, key: Key) -> float:
        found = self.index.get(key)
        if found is None:
            return 0.0
        # A short row is cheaper as a Python list than through numpy's reduction machinery.
        return max(self.values[found].tolist()) if self.n_actions <= 32 else float(self.values[found].max())

    @property
    def nbytes(self) -> int:
        return int(len(self.index) * self.n_actions * self.values.itemsize)

    def state_dict(self) -> StateTree:
        """Keys as a matrix (one row per state, the key's values) and the Q-values row for row."""
        keys = list(self.index)
        if keys and not all(isinstance(k, tuple) for k in keys):
            raise TypeError("only tuple state keys can be checkpointed; make encoder.hashable return a tuple")
        try:
            key_matrix = np.array(keys) if keys else np.zeros((0, 0), dtype=np.int64)
        except ValueError:  # rows of different lengths
            key_matrix = np.empty(0, dtype=object)
        if key_matrix.ndim != 2 or key_matrix.dtype.kind not in "iuf":
            raise TypeError("state keys must be flat tuples of numbers, all of one length, to be checkpointed")
        return {"keys": key_matrix, "values": self.values[:len(keys)].copy()}

    def load_state_dict(self, state: StateTree) -> None:
        values = np.asarray(state["values"], dtype=np.float64)
        keys = np.asarray(state["keys"])
        if values.ndim != 2 or values.shape[1] != self.n_actions or len(keys) != len(values):
            raise ValueError(f"Q-table checkpoint holds values of shape {values.shape} for {len(keys)} keys, "
                             f"but this table has {self.n_actions} actions")
        if self.max_states is not None and len(values) > self.max_states:
            raise ConfigError(f"the checkpoint's Q-table holds {len(values)} states, more than the "
                              f"{self.max_states} this config allows; {self.full_hint}")
        self.index = {tuple(k): i for i, k in enumerate(keys.tolist())}
        capacity = max(64, 2 * len(values))
        if self.max_states is not None:
            capacity = max(len(values), min(capacity, self.max_states))
        self.values = np.zeros((capacity, self.n_actions))
        self.values[:len(values)] = values


def greedy(row: list[float], rng: random.Random) -> int:
    """Index of the largest value, ties broken uniformly at random (an unvisited state: any action)."""
    best = max(row)
    if row.count(best) == 1:
        return row.index(best)
    ties = [i for i, value in enumerate(row) if value == best]
    return ties[int(rng.random() * len(ties))]


def random_state(rng: random.Random) -> StateTree:
    # Python's Mersenne Twister: ~10x cheaper per draw than a numpy Generator, which matters when
    # acting costs a handful of draws per env step.
    version, internal, gauss = rng.getstate()
    return {"version": version, "internal": np.array(internal, dtype=np.int64), "gauss": gauss}


def set_random_state(rng: random.Random, state: StateTree) -> None:
    internal = tuple(int(v) for v in np.asarray(state["internal"]).tolist())
    rng.setstate((int(state["version"]), internal, state["gauss"]))


STACKED_KEYS = 4096
"""Joint observation batches whose keys a KeyCache keeps (a few MiB at most for small observations)."""

ACTION_BATCHES = 1024
"""Distinct joint actions whose read-only arrays an IQLAgent hands out again."""


class KeyCache:
    """State keys of the last two batches per agent, found by the batch's bytes.

    Per env step the same observations are asked for three times: ``act`` on this step's
    observations, the learner on the same ones, then on the next observations, which the next
    ``act`` sees again (unless an episode ended). Comparing raw bytes costs a fraction of hashing
    the rows again, so each observation batch is turned into keys once.
    """

    def __init__(self, keys: StateKeys):
        self.keys = keys
        self._recent: dict[str, list] = {}
        """Agent id -> [bytes, keys, bytes, keys]: the newer batch first."""
        self._stacked: dict[tuple, list[list[Key]]] = {}
        """Bytes, shape and dtype of a whole ``AgentBatch``'s ``stacked`` -> its keys, one list per agent."""

    def __call__(self, agent_id: str, batch: np.ndarray) -> list[Key]:
        raw = batch.tobytes()
        recent = self._recent.get(agent_id)
        if recent is None:
            recent = self._recent[agent_id] = [None, None, None, None]
        elif recent[0] == raw:
            return recent[1]
        elif recent[2] == raw:
            return recent[3]
        found = self.keys(batch)
        recent[2:] = recent[:2]
        recent[:2] = raw, found
        return found

    def stacked(self, stacked: np.ndarray) -> list[list[Key]]:
        """Keys of an (agents, N, ...) batch of every agent's observations: one list per agent.

        Keys are a function of the observations alone, so they are kept by the batch's bytes for
        every batch seen (up to STACKED_KEYS, then the cache starts again): on small grids the whole
        joint observations recur, and a look-up costs a fraction of encoding the rows again."""
        raw = (stacked.tobytes(), stacked.shape, stacked.dtype)  # equal bytes of another shape split otherwise
        found = self._stacked.get(raw)
        if found is not None:
            return found
        n = stacked.shape[1]
        flat = self.keys(stacked.reshape(-1, *stacked.shape[2:]))
        found = [flat[start:start + n] for start in range(0, len(flat), n)] if n > 1 else [[key] for key in flat]
        if len(self._stacked) >= STACKED_KEYS:
            self._stacked.clear()
        self._stacked[raw] = found
        return found


class IQLAgent(Agent):
    """One Q-table per agent id, epsilon-greedy with random tie-breaking; agents share nothing."""

    def __init__(self, agent_ids: Iterable[str], n_actions: Mapping[str, int], keys: StateKeys,
                 exploration: ExplorationConfig, seed: int):
        self.agent_ids = tuple(agent_ids)
        self.n_actions = {a: int(n_actions[a]) for a in self.agent_ids}
        self.tables = {a: QTable(self.n_actions[a]) for a in self.agent_ids}
        self.keys = KeyCache(keys)
        self.epsilon = EpsilonSchedule(exploration)
        self.rng = random.Random(seed)
        self._actions: dict[tuple, AgentBatch] = {}

    def act(self, obs, *, explore: bool = True) -> Acting:
        rng, epsilon = self.rng, self.epsilon.value if explore else 0.0
        draw, tables, n_actions = rng.random, self.tables, self.n_actions
        stacked = getattr(obs, "stacked", None)
        if stacked is not None:
            # every agent's rows at once (rlf.AgentBatch): one key look-up and one action array for
            # all agents; rows in the batch's order, which is also the order of the draws below
            ids = obs.ids
            chosen = []  # a list, made an array once: cheaper than numpy item assignment per row
            for agent_id, keys in zip(ids, self.keys.stacked(stacked), strict=True):
                table, n = tables[agent_id], n_actions[agent_id]
                index, values = table.index, table.values
                for key in keys:
                    if epsilon and draw() < epsilon:
                        chosen.append(int(draw() * n))
                        continue
                    found = index.get(key)
                    if found is None:
                        chosen.append(int(draw() * n))
                        continue
                    row = values[found].tolist()
                    best = max(row)
                    # greedy()'s no-tie case inlined (the common one once values differ): no call per row
                    chosen.append(row.index(best) if row.count(best) == 1 else greedy(row, rng))
            return Acting(self._action_batch(ids, chosen, stacked.shape[:2]))
        keys_of = self.keys
        actions = {}
        for agent_id in self.agent_ids:
            table, n = tables[agent_id], n_actions[agent_id]
            index, values = table.index, table.values
            chosen = []
            for key in keys_of(agent_id, obs[agent_id]):
                if epsilon and draw() < epsilon:
                    chosen.append(int(draw() * n))
                    continue
                found = index.get(key)
                chosen.append(int(draw() * n) if found is None else greedy(values[found].tolist(), rng))
            actions[agent_id] = np.array(chosen, dtype=np.int64)
        return Acting(actions)

    def _action_batch(self, ids: tuple[str, ...], chosen: list[int], shape: tuple[int, ...]) -> AgentBatch:
        """The actions as an AgentBatch; with few agents and envs the joint actions repeat, so their
        read-only arrays are kept and handed out again (an array and a batch per step cost as much
        as choosing the actions)."""
        key = (ids, *chosen)
        found = self._actions.get(key)
        if found is None:
            array = np.array(chosen, dtype=np.int64).reshape(shape)
            array.flags.writeable = False
            found = AgentBatch.of(ids, array)
            if len(chosen) <= 4 and len(self._actions) < ACTION_BATCHES:  # more rows rarely repeat
                self._actions[key] = found
        return found

    def on_progress(self, env_steps: int, episodes_ended: int) -> None:
        self.epsilon.advance(env_steps, episodes_ended)

    @property
    def table_size(self) -> int:
        return sum(len(t) for t in self.tables.values())

    def metrics(self) -> dict[str, float]:
        return {"epsilon": float(self.epsilon.value), "table_size": float(self.table_size)}

    def weights(self) -> StateTree:
        """Tables and exploration, without the action RNG: what actor copies load (each keeps its stream)."""
        return {"tables": {a: t.state_dict() for a, t in self.tables.items()}, "epsilon": self.epsilon.state_dict()}

    def state_dict(self) -> StateTree:
        return {**self.weights(), "rng": random_state(self.rng)}

    def load_state_dict(self, state: StateTree) -> None:
        missing = set(self.agent_ids) - set(state["tables"])
        if missing:
            raise ValueError(f"checkpoint has no Q-table for agent(s) {sorted(missing)}")
        for agent_id, table in self.tables.items():
            table.load_state_dict(state["tables"][agent_id])
        self.epsilon.load_state_dict(state["epsilon"])
        if "rng" in state:
            set_random_state(self.rng, state["rng"])

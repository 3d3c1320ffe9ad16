"""The independent tabular update, applied online to every env step's transitions."""

from __future__ import annotations

from rlf import Learner, StateTree, Transitions

from .model import IQLAgent


class IQLLearner(Learner):
    """``Q(s,a) += alpha * (r + gamma * max Q(s') - Q(s,a))`` per agent, on its own reward.

    The transitions of the step just taken are the whole "replay": a tabular update needs no
    sampling, and learning from each step once, in order, is exactly PPAGE's training loop. Only a true
    terminal cuts the bootstrap; a truncated step still bootstraps from its final observation.
    """

    def __init__(self, agent: IQLAgent, alpha: float, gamma: float):
        self.agent = agent
        self.alpha = alpha
        self.gamma = gamma
        self.updates = 0

    def learn(self, experience: Transitions) -> dict[str, float]:
        # Called every env step: at one env with two agents this loop is a third of the step's cost,
        # so values stay Python floats and lists (numpy scalars and reductions cost more per call).
        rows = _stacked_rows(experience)
        if rows is None:
            agent = self.agent
            keys_of = agent.keys
            rows = []
            for agent_id in agent.agent_ids:
                alive = experience.alive[agent_id].tolist()
                if True not in alive:
                    continue
                rows.append((agent_id, alive, keys_of(agent_id, experience.obs[agent_id]),
                             keys_of(agent_id, experience.next_obs[agent_id]),
                             experience.actions[agent_id].tolist(), experience.rewards[agent_id].tolist(),
                             experience.terminated[agent_id].tolist()))
        else:
            keys = self.agent.keys.stacked
            ids, alive_rows = rows
            rows = zip(ids, alive_rows, keys(experience.obs.stacked), keys(experience.next_obs.stacked),
                       experience.actions.stacked.tolist(), experience.rewards.stacked.tolist(),
                       experience.terminated.stacked.tolist(), strict=True)
        alpha, gamma, tables = self.alpha, self.gamma, self.agent.tables
        td_total, count = 0.0, 0
        for agent_id, alive, keys, next_keys, actions, rewards, terminated in rows:
            if True not in alive:
                continue
            table = tables[agent_id]
            index, values, short = table.index, table.values, table.n_actions <= 32
            for i, taking_part in enumerate(alive):
                if not taking_part:
                    continue
                row = index.get(keys[i])
                if row is None:
                    row = table.row(keys[i])
                    values = table.values  # adding a row may have grown the matrix
                bootstrap = 0.0
                if not terminated[i]:
                    following = index.get(next_keys[i])
                    if following is not None:
                        # a short row is cheaper as a Python list than through numpy's reduction machinery
                        bootstrap = max(values[following].tolist()) if short else float(values[following].max())
                action = actions[i]
                current = values.item(row, action)  # a Python float: cheaper arithmetic than numpy scalars
                td = rewards[i] + gamma * bootstrap - current
                values[row, action] = current + alpha * td
                td_total += td if td >= 0.0 else -td
                count += 1
        self.updates += count
        if not count:
            return {}
        # table_size reaches the logs through the agent's metrics(), which the strategy adds per chunk
        return {"td_error": td_total / count}

    def weights(self) -> StateTree:
        return self.agent.weights()

    def state_dict(self) -> StateTree:
        return {"updates": self.updates}

    def load_state_dict(self, state: StateTree) -> None:
        self.updates = int(state["updates"])


def _stacked_rows(experience: Transitions) -> tuple[tuple[str, ...], list[list[bool]]] | None:
    """The agent ids and alive rows where every field is an ``rlf.AgentBatch`` in one agent order
    (then each field is one ``tolist``, not one per agent), else None."""
    alive = experience.alive
    ids = getattr(alive, "ids", None)
    if ids is None:
        return None
    for field in (experience.obs, experience.next_obs, experience.actions, experience.rewards,
                  experience.terminated):
        other = getattr(field, "ids", None)
        if other is not ids and (other is None or tuple(other) != tuple(ids)):
            return None
    return ids, alive.stacked.tolist()

"""The centralized tabular update, applied online to every env step's transitions."""

from __future__ import annotations

from rlf import Learner, StateTree, Transitions

from .model import CQLAgent


class CQLLearner(Learner):
    """``Q(S,A) += alpha * (R + gamma * max Q(S') - Q(S,A))`` on the joint table, R = the sum of rewards.

    Agents that took no part in a step (a captured prey) enter the joint action as action 0, so the
    step's value is credited to one table entry rather than spread over the actions they did not
    take. The bootstrap is cut only when every agent of the group reached a true terminal (or had
    already left); truncation keeps it.
    """

    def __init__(self, agent: CQLAgent, alpha: float, gamma: float):
        self.agent = agent
        self.alpha = alpha
        self.gamma = gamma
        self.updates = 0

    def learn(self, experience: Transitions) -> dict[str, float]:
        agent, alpha, gamma, table = self.agent, self.alpha, self.gamma, self.agent.table
        ids = agent.agent_ids
        alive = [experience.alive[a].tolist() for a in ids]
        actions = [experience.actions[a].tolist() for a in ids]
        rewards = [experience.rewards[a].tolist() for a in ids]
        terminated = [experience.terminated[a].tolist() for a in ids]
        keys = agent.joint_keys(experience.obs)
        next_keys = agent.joint_keys(experience.next_obs)
        per_agent = list(zip(agent.shape, alive, actions, rewards, terminated, strict=True))
        td_total, count = 0.0, 0
        for i, key in enumerate(keys):
            joint_action, reward, terminal, anyone = 0, 0.0, True, False
            for size, present, action, gained, ended in per_agent:
                if present[i]:
                    anyone = True
                    joint_action = joint_action * size + action[i]
                    reward += gained[i]
                    terminal = terminal and ended[i]
                else:
                    joint_action *= size
            if not anyone:
                continue
            row = table.row(key)
            bootstrap = 0.0 if terminal else table.max_q(next_keys[i])
            values = table.values
            current = values.item(row, joint_action)
            td = reward + gamma * bootstrap - current
            values[row, joint_action] = current + alpha * td
            td_total += abs(td)
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

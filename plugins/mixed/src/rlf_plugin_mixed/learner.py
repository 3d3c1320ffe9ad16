"""Both teams' updates on every step: each team's learner sees only its own agents."""

from __future__ import annotations

from rlf_plugin_cql import CQLLearner
from rlf_plugin_iql import IQLLearner

from rlf import Learner, StateTree, Transitions

from .model import MixedAgent


def restrict(experience: Transitions, agent_ids: tuple[str, ...]) -> Transitions:
    """The same step, seen by a subset of the agents."""
    def pick(arrays):
        return {a: arrays[a] for a in agent_ids}

    return Transitions(pick(experience.obs), pick(experience.actions), pick(experience.rewards),
                       pick(experience.next_obs), pick(experience.terminated), pick(experience.truncated),
                       pick(experience.alive), experience.episode_ended)


class MixedLearner(Learner):
    def __init__(self, agent: MixedAgent, alpha: float, gamma: float):
        self.agent = agent
        self.learners: dict[str, IQLLearner | CQLLearner] = {}
        for team in agent.teams:
            cls = CQLLearner if team.kind == "cql" else IQLLearner
            self.learners[team.name] = cls(team.agent, alpha, gamma)

    def learn(self, experience: Transitions) -> dict[str, float]:
        metrics: dict[str, float] = {}
        td_total, count = 0.0, 0
        for team in self.agent.teams:
            before = self.learners[team.name].updates
            found = self.learners[team.name].learn(restrict(experience, team.agent_ids))
            if found:
                updates = self.learners[team.name].updates - before
                td_total += found["td_error"] * updates
                count += updates
                metrics[f"td_error/{team.name}"] = found["td_error"]
        if count:
            metrics["td_error"] = td_total / count
        return metrics

    def weights(self) -> StateTree:
        return self.agent.weights()

    def state_dict(self) -> StateTree:
        return {name: learner.state_dict() for name, learner in self.learners.items()}

    def load_state_dict(self, state: StateTree) -> None:
        for name, learner in self.learners.items():
            learner.load_state_dict(state[name])

"""One IQL or CQL agent per team, acting side by side."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rlf_plugin_cql import CQLAgent
from rlf_plugin_iql import IQLAgent, StateKeys

from rlf import Acting, Agent, AgentArrays, ConfigError, EnvSpec, IncompatibleError, StateTree

from .config import MixedConfig

TEAM_FIELDS = {"predator": "predators", "prey": "prey"}
"""Team name in the env's ``teams`` metadata -> the config field that picks its learner."""


@dataclass
class Team:
    name: str
    kind: str
    agent_ids: tuple[str, ...]
    agent: IQLAgent | CQLAgent


def split_teams(spec: EnvSpec) -> dict[str, tuple[str, ...]]:
    """Team name -> its agent ids, in the order the env lists them."""
    teams = spec.metadata.get("teams")
    if not teams:
        raise IncompatibleError(f"mixed assigns a learner per team, but environment {spec.name!r} declares no teams; "
                          "use iql or cql on it instead")
    grouped: dict[str, list[str]] = {}
    for agent_id in spec.agent_ids:
        name = teams.get(agent_id)
        if name not in TEAM_FIELDS:
            raise ConfigError(f"mixed knows the teams {sorted(TEAM_FIELDS)}, but agent {agent_id!r} of "
                              f"{spec.name!r} is on team {name!r}; use iql or cql on this environment")
        grouped.setdefault(name, []).append(agent_id)
    return {name: tuple(ids) for name, ids in grouped.items()}


class MixedAgent(Agent):
    """Routes each team's observations to its own IQL or CQL agent and merges their actions."""

    def __init__(self, spec: EnvSpec, config: MixedConfig, seed: int):
        keys = StateKeys(spec.metadata)
        n_actions = {a: spec.action_spaces[a].n for a in spec.agent_ids}
        self.teams: list[Team] = []
        for offset, (name, ids) in enumerate(split_teams(spec).items()):
            kind = getattr(config, TEAM_FIELDS[name])
            # Distinct seeds keep the teams' exploration streams independent of each other.
            if kind == "cql":
                agent: IQLAgent | CQLAgent = CQLAgent(
                    ids, n_actions, keys, config.exploration, seed + offset, config.max_joint_actions,
                    config.max_table_mib)
            else:
                agent = IQLAgent(ids, n_actions, keys, config.exploration, seed + offset)
            self.teams.append(Team(name, kind, ids, agent))

    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        actions: AgentArrays = {}
        for team in self.teams:
            actions.update(team.agent.act({a: obs[a] for a in team.agent_ids}, explore=explore).actions)
        return Acting(actions)

    def on_progress(self, env_steps: int, episodes_ended: int) -> None:
        for team in self.teams:
            team.agent.on_progress(env_steps, episodes_ended)

    @property
    def table_size(self) -> int:
        return sum(team.agent.table_size for team in self.teams)

    def metrics(self) -> dict[str, float]:
        out = {"epsilon": float(self.teams[0].agent.epsilon.value), "table_size": float(self.table_size)}
        for team in self.teams:
            out[f"table_size/{team.name}"] = float(team.agent.table_size)
        return out

    def weights(self) -> StateTree:
        """Every team's tables and exploration, without the action RNGs (what actor copies load)."""
        return {"teams": {team.name: {"kind": team.kind, "agent": team.agent.weights()} for team in self.teams}}

    def state_dict(self) -> StateTree:
        return {"teams": {team.name: {"kind": team.kind, "agent": team.agent.state_dict()} for team in self.teams}}

    def load_state_dict(self, state: StateTree) -> None:
        saved: Mapping[str, StateTree] = state["teams"]
        for team in self.teams:
            part = saved.get(team.name)
            if part is None or part["kind"] != team.kind:
                found = None if part is None else part["kind"]
                raise ValueError(f"checkpoint holds {found!r} for team {team.name!r}, this config uses {team.kind!r}")
            team.agent.load_state_dict(part["agent"])

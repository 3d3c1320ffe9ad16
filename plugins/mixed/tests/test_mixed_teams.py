"""Team assignment, routing of acting and learning, and checkpoints, on a hand-made spec."""

import numpy as np
import pytest
from gymnasium import spaces
from rlf_plugin_cql import CQLAgent
from rlf_plugin_iql import IQLAgent
from rlf_plugin_mixed import MixedAgent, MixedConfig, MixedLearner, split_teams

from rlf import ConfigError, EnvSpec, IncompatibleError, Transitions

TEAMS = {"predator_0": "predator", "predator_1": "predator", "prey_0": "prey", "prey_1": "prey"}


def spec_of(ids, teams=TEAMS):
    return EnvSpec("toy", tuple(ids), {a: spaces.Box(-4, 4, (2,)) for a in ids}, {a: spaces.Discrete(5) for a in ids},
                   True, 2, {"teams": {a: teams[a] for a in ids}} if teams else {})


def test_each_team_gets_the_learner_its_field_names():
    agent = MixedAgent(spec_of(TEAMS), MixedConfig(predators="cql", prey="iql"), seed=0)
    kinds = {team.name: (team.kind, type(team.agent), team.agent_ids) for team in agent.teams}
    assert kinds == {"predator": ("cql", CQLAgent, ("predator_0", "predator_1")),
                     "prey": ("iql", IQLAgent, ("prey_0", "prey_1"))}
    swapped = MixedAgent(spec_of(TEAMS), MixedConfig(predators="iql", prey="cql"), seed=0)
    assert [(t.name, t.kind) for t in swapped.teams] == [("predator", "iql"), ("prey", "cql")]


def test_only_the_learning_team_exists_when_one_team_learns():
    agent = MixedAgent(spec_of(["prey_0", "prey_1"]), MixedConfig(prey="cql"), seed=0)
    assert [(t.name, t.kind) for t in agent.teams] == [("prey", "cql")]
    assert set(agent.metrics()) == {"epsilon", "table_size", "table_size/prey"}


def test_an_env_without_known_teams_is_a_config_error():
    with pytest.raises(IncompatibleError, match="declares no teams"):
        split_teams(spec_of(["predator_0"], teams=None))
    with pytest.raises(ConfigError, match="team 'red'"):
        split_teams(spec_of(["predator_0"], teams={"predator_0": "red"}))


def test_a_cql_team_too_large_names_the_mixed_field():
    with pytest.raises(ConfigError, match="algo.max_joint_actions=10"):
        MixedAgent(spec_of(TEAMS), MixedConfig(max_joint_actions=10), seed=0)


def random_step(rng, ids, n_envs=2):
    def per(make):
        return {a: make() for a in ids}

    return Transitions(per(lambda: rng.integers(-2, 3, (n_envs, 2)).astype(np.float32)),
                       per(lambda: rng.integers(0, 5, n_envs)), per(lambda: rng.normal(size=n_envs).astype(np.float32)),
                       per(lambda: rng.integers(-2, 3, (n_envs, 2)).astype(np.float32)),
                       per(lambda: np.zeros(n_envs, bool)), per(lambda: np.zeros(n_envs, bool)),
                       per(lambda: np.ones(n_envs, bool)), np.zeros(n_envs, bool))


def test_both_teams_act_and_learn_on_every_step():
    agent = MixedAgent(spec_of(TEAMS), MixedConfig(exploration={"start": 0.3}), seed=0)
    learner = MixedLearner(agent, alpha=0.5, gamma=0.9)
    rng = np.random.default_rng(0)
    step = random_step(rng, TEAMS)
    acting = agent.act(step.obs)
    assert set(acting.actions) == set(TEAMS) and all(len(v) == 2 for v in acting.actions.values())
    metrics = learner.learn(step)
    assert set(metrics) == {"td_error", "td_error/predator", "td_error/prey"}
    predators, prey = agent.teams[0].agent, agent.teams[1].agent
    assert len(predators.table) == 2  # one joint state per env
    assert len(prey.tables["prey_0"]) >= 1 and len(prey.tables["prey_1"]) >= 1
    assert agent.metrics()["table_size"] == 2 + len(prey.tables["prey_0"]) + len(prey.tables["prey_1"])


def test_checkpoint_round_trip_and_a_mismatched_team_learner_is_refused():
    config = MixedConfig(exploration={"start": 0.3})
    agent = MixedAgent(spec_of(TEAMS), config, seed=0)
    learner = MixedLearner(agent, alpha=0.5, gamma=0.9)
    rng = np.random.default_rng(1)
    for _ in range(30):
        learner.learn(random_step(rng, TEAMS))
    agent.on_progress(4, 3)
    twin = MixedAgent(spec_of(TEAMS), config, seed=42)
    twin.load_state_dict(agent.state_dict())
    twin_learner = MixedLearner(twin, alpha=0.5, gamma=0.9)
    twin_learner.load_state_dict(learner.state_dict())
    assert twin.metrics() == agent.metrics()
    obs = random_step(rng, TEAMS, n_envs=64).obs
    mine, theirs = agent.act(obs).actions, twin.act(obs).actions
    assert all(np.array_equal(mine[a], theirs[a]) for a in TEAMS)
    other = MixedAgent(spec_of(TEAMS), MixedConfig(predators="iql"), seed=0)
    with pytest.raises(ValueError, match="team 'predator'"):
        other.load_state_dict(agent.state_dict())


def test_weights_carry_every_team_without_random_streams():
    agent = MixedAgent(spec_of(TEAMS), MixedConfig(), seed=0)
    MixedLearner(agent, alpha=0.5, gamma=0.9).learn(random_step(np.random.default_rng(2), TEAMS))
    weights = MixedLearner(agent, alpha=0.5, gamma=0.9).weights()
    assert all("rng" not in part["agent"] for part in weights["teams"].values())
    actor = MixedAgent(spec_of(TEAMS), MixedConfig(), seed=5)
    streams = [team.agent.rng.getstate() for team in actor.teams]
    actor.load_state_dict(weights)
    assert [team.agent.rng.getstate() for team in actor.teams] == streams
    assert actor.table_size == agent.table_size

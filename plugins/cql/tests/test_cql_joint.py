"""The joint table: encoding, marginal acting, the centralized update, size limits, checkpoints."""

import numpy as np
import pytest
from rlf_plugin_cql import CQLAgent, CQLLearner
from rlf_plugin_iql import StateKeys

from rlf import ConfigError, ExplorationConfig, Transitions

IDS = ("a", "b", "c")


def make_agent(shape=(5, 5, 5), start=0.0, seed=0, max_joint_actions=3125, max_table_mib=64, ids=IDS):
    return CQLAgent(ids, dict(zip(ids, shape, strict=True)), StateKeys({}), ExplorationConfig(start=start, end=0.0),
                    seed, max_joint_actions, max_table_mib)


def test_joint_action_is_the_mixed_radix_number_of_the_actions():
    agent = make_agent()
    assert agent.joint_action([2, 3, 4]) == 2 * 25 + 3 * 5 + 4
    uneven = make_agent(shape=(3, 4, 2))
    for actions in [(0, 0, 0), (2, 3, 1), (1, 2, 0)]:
        assert uneven.joint_action(actions) == np.ravel_multi_index(actions, (3, 4, 2))


@pytest.mark.parametrize("shape", [(5, 5, 5), (3, 4, 2)])
def test_each_agent_acts_on_the_joint_row_averaged_over_the_other_axes(shape):
    agent = make_agent(shape=shape)
    rng = np.random.default_rng(1)
    q = rng.normal(size=int(np.prod(shape)))
    tensor = q.reshape(shape)
    for k in range(3):
        others = tuple(axis for axis in range(3) if axis != k)
        assert np.allclose(agent.marginal(q, k), tensor.mean(axis=others))
    key = (1.0, 2.0, 3.0)
    agent.table.values[agent.table.row(key)] = q
    obs = {a: np.array([[v]], dtype=np.float32) for a, v in zip(IDS, key, strict=True)}
    actions = agent.act(obs, explore=False).actions
    for k, a in enumerate(IDS):
        others = tuple(axis for axis in range(3) if axis != k)
        assert actions[a][0] == np.argmax(tensor.mean(axis=others))


def test_the_marginal_can_disagree_with_the_best_joint_action():
    agent = make_agent(shape=(2, 2), ids=("a", "b"))
    # best joint action (0, 0) = 10, but agent a's average favours action 1: (10 - 10) / 2 < (4 + 4) / 2
    q = np.array([10.0, -10.0, 4.0, 4.0])
    agent.table.values[agent.table.row((0.0, 0.0))] = q
    obs = {a: np.zeros((1, 1), dtype=np.float32) for a in ("a", "b")}
    assert agent.act(obs, explore=False).actions["a"][0] == 1


def one_step(obs, actions, rewards, next_obs, terminated, truncated=(False,) * 3, alive=(True,) * 3):
    def per(values, dtype):
        return {a: np.asarray([v], dtype=dtype) for a, v in zip(IDS, values, strict=True)}

    def obs_of(values):
        return {a: np.asarray([[v]], dtype=np.float32) for a, v in zip(IDS, values, strict=True)}

    return Transitions(obs_of(obs), per(actions, np.int64), per(rewards, np.float32), obs_of(next_obs),
                       per(terminated, bool), per(truncated, bool), per(alive, bool), np.asarray([True]))


def test_update_uses_the_team_reward_and_the_joint_state_and_action():
    agent = make_agent()
    agent.table.values[agent.table.row((1.0, 1.0, 1.0))][7] = 20.0
    metrics = CQLLearner(agent, alpha=0.5, gamma=0.9).learn(
        one_step(obs=(0, 0, 0), actions=(1, 2, 3), rewards=(1.0, 2.0, -4.0), next_obs=(1, 1, 1),
                 terminated=(False,) * 3))
    expected = 0.5 * (-1.0 + 0.9 * 20.0)
    row = agent.table.q((0.0, 0.0, 0.0))
    assert row[1 * 25 + 2 * 5 + 3] == pytest.approx(expected)
    assert np.count_nonzero(row) == 1
    assert metrics == {"td_error": pytest.approx(2 * expected)}


@pytest.mark.parametrize("terminated,truncated,alive,cut", [
    ((True, True, True), (False,) * 3, (True,) * 3, True),         # every agent reached a terminal
    ((True, False, False), (False, True, True), (True,) * 3, False),  # some were only truncated
    ((True, True, False), (False,) * 3, (True, True, False), True),  # the third had already left
    ((True, False, False), (False,) * 3, (True,) * 3, False),      # a captured prey, the rest go on
])
def test_the_bootstrap_is_cut_only_when_the_whole_group_terminated(terminated, truncated, alive, cut):
    agent = make_agent()
    agent.table.values[agent.table.row((1.0, 1.0, 1.0))][:] = 10.0
    CQLLearner(agent, alpha=1.0, gamma=1.0).learn(
        one_step(obs=(0, 0, 0), actions=(4, 4, 4), rewards=(1.0, 0.0, 0.0), next_obs=(1, 1, 1),
                 terminated=terminated, truncated=truncated, alive=alive))
    value = agent.table.q((0.0, 0.0, 0.0)).max()
    assert value == pytest.approx(1.0 if cut else 11.0)


def test_agents_that_took_no_part_enter_the_joint_action_as_action_zero():
    agent = make_agent()
    CQLLearner(agent, alpha=1.0, gamma=0.0).learn(
        one_step(obs=(0, 0, 0), actions=(4, 3, 2), rewards=(1.0, 0.0, 0.0), next_obs=(1, 1, 1),
                 terminated=(False,) * 3, alive=(True, False, True)))
    row = agent.table.q((0.0, 0.0, 0.0))
    assert row[4 * 25 + 0 * 5 + 2] == 1.0 and np.count_nonzero(row) == 1
    CQLLearner(agent, alpha=1.0, gamma=0.0).learn(
        one_step(obs=(5, 5, 5), actions=(1, 1, 1), rewards=(1.0, 1.0, 1.0), next_obs=(1, 1, 1),
                 terminated=(False,) * 3, alive=(False,) * 3))
    assert agent.table.find((5.0, 5.0, 5.0)) is None


def test_too_many_joint_actions_are_refused_with_the_field_to_change():
    with pytest.raises(ConfigError, match="max_joint_actions=100") as error:
        make_agent(max_joint_actions=100)
    assert "125 Q-values" in str(error.value) and "\n" not in str(error.value)


def test_a_table_outgrowing_its_memory_budget_stops_with_a_config_error():
    agent = make_agent(shape=(32, 32, 32), max_joint_actions=32**3, max_table_mib=1)  # 256 KiB rows: 4 fit
    learner = CQLLearner(agent, alpha=0.5, gamma=0.9)
    with pytest.raises(ConfigError, match="max_table_mib"):
        for state in range(5):
            learner.learn(one_step(obs=(state, 0, 0), actions=(0, 0, 0), rewards=(1.0, 0.0, 0.0),
                                   next_obs=(0, 0, 0), terminated=(False,) * 3))
    assert len(agent.table) == 4


def test_checkpoint_restores_table_exploration_and_random_stream():
    agent = make_agent(start=0.5)
    learner = CQLLearner(agent, alpha=0.5, gamma=0.9)
    rng = np.random.default_rng(0)
    for _ in range(40):
        learner.learn(one_step(obs=tuple(rng.integers(0, 3, 3)), actions=tuple(rng.integers(0, 5, 3)),
                               rewards=tuple(rng.normal(size=3)), next_obs=tuple(rng.integers(0, 3, 3)),
                               terminated=(False,) * 3))
    agent.on_progress(5, 2)
    twin = make_agent(start=0.5, seed=99)
    twin.load_state_dict(agent.state_dict())
    assert twin.metrics() == agent.metrics()
    obs = {a: rng.integers(0, 3, size=(50, 1)).astype(np.float32) for a in IDS}
    for explore in (True, False):
        mine, theirs = agent.act(obs, explore=explore).actions, twin.act(obs, explore=explore).actions
        assert all(np.array_equal(mine[a], theirs[a]) for a in IDS)
    with pytest.raises(ValueError, match="joint table is over agents"):
        make_agent(shape=(5, 5), ids=("a", "b")).load_state_dict(agent.state_dict())


def test_weights_for_actor_copies_leave_the_action_random_stream_alone():
    agent = make_agent()
    agent.table.values[agent.table.row((1.0, 1.0, 1.0))][3] = 2.0
    weights = CQLLearner(agent, 0.1, 0.9).weights()
    assert "rng" not in weights
    actor = make_agent(seed=3)
    stream = actor.rng.getstate()
    actor.load_state_dict(weights)
    assert actor.rng.getstate() == stream and actor.table.q((1.0, 1.0, 1.0))[3] == 2.0

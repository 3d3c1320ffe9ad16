"""The IQL update rule, exploration and checkpointing on hand-made transitions."""

import numpy as np
import pytest
from gymnasium import spaces
from rlf_plugin_iql import IQLAgent, IQLConfig, IQLLearner, StateKeys, build_agent, build_learner

from rlf import BuildContext, EnvSpec, ExplorationConfig, RunConfig, Transitions

IDS = ("a", "b")


def make_agent(start=1.0, end=0.05, decay=0.5, n_actions=3, seed=0):
    exploration = ExplorationConfig(start=start, end=end, decay=decay)
    return IQLAgent(IDS, {a: n_actions for a in IDS}, StateKeys({}), exploration, seed)


def arrays(**per_agent):
    return {a: np.asarray(v) for a, v in per_agent.items()}


def step(obs, actions, rewards, next_obs, terminated=(False, False), truncated=(False, False),
         alive=(True, True)):
    """One env, two agents; every argument is (value for a, value for b)."""
    def per(values, dtype):
        return {a: np.asarray([v], dtype=dtype) for a, v in zip(IDS, values, strict=True)}

    def obs_of(values):
        return {a: np.asarray([[v]], dtype=np.float32) for a, v in zip(IDS, values, strict=True)}

    return Transitions(obs_of(obs), per(actions, np.int64), per(rewards, np.float32), obs_of(next_obs),
                       per(terminated, bool), per(truncated, bool), per(alive, bool),
                       np.asarray([any(terminated) or any(truncated)]))


def test_update_bootstraps_from_the_best_next_value_with_its_own_reward():
    agent = make_agent()
    learner = IQLLearner(agent, alpha=0.5, gamma=0.9)
    agent.tables["a"].values[agent.tables["a"].row((1.0,))] = [2.0, 4.0, 3.0]
    metrics = learner.learn(step(obs=(0, 0), actions=(2, 1), rewards=(1.0, -1.0), next_obs=(1, 1)))
    # a: 0 + 0.5 * (1 + 0.9 * 4 - 0) = 2.3; b: next state unseen (zeros), 0.5 * -1 = -0.5
    assert agent.tables["a"].q((0.0,)).tolist() == pytest.approx([0.0, 0.0, 2.3])
    assert agent.tables["b"].q((0.0,)).tolist() == pytest.approx([0.0, -0.5, 0.0])
    assert metrics["td_error"] == pytest.approx((4.6 + 1.0) / 2)
    assert set(metrics) == {"td_error"}
    assert agent.tables["b"].find((1.0,)) is None  # reading an unseen next state adds no row


def test_only_a_true_terminal_cuts_the_bootstrap():
    for terminated, truncated, expected in [((True, True), (False, False), 0.5),
                                            ((False, False), (True, True), 0.5 + 0.5 * 10.0)]:
        agent = make_agent()
        for a in IDS:
            agent.tables[a].values[agent.tables[a].row((1.0,))] = [10.0, 0.0, 0.0]
        IQLLearner(agent, alpha=0.5, gamma=1.0).learn(
            step(obs=(0, 0), actions=(0, 0), rewards=(1.0, 1.0), next_obs=(1, 1),
                 terminated=terminated, truncated=truncated))
        assert agent.tables["a"].q((0.0,))[0] == pytest.approx(expected)


def test_agents_that_took_no_part_are_not_updated():
    agent = make_agent()
    IQLLearner(agent, alpha=0.5, gamma=0.9).learn(
        step(obs=(0, 0), actions=(0, 0), rewards=(1.0, 5.0), next_obs=(1, 1), alive=(True, False)))
    assert agent.tables["a"].q((0.0,))[0] == pytest.approx(0.5)
    assert len(agent.tables["b"]) == 0


def test_epsilon_decays_per_finished_episode_not_per_step():
    agent = make_agent(start=1.0, end=0.1, decay=0.5)
    agent.on_progress(env_steps=500, episodes_ended=0)
    assert agent.metrics()["epsilon"] == 1.0
    agent.on_progress(env_steps=1, episodes_ended=1)
    assert agent.metrics()["epsilon"] == 0.5
    agent.on_progress(env_steps=1, episodes_ended=10)
    assert agent.metrics()["epsilon"] == 0.1


def test_acting_is_greedy_without_exploration_and_uniform_with_full_exploration():
    agent = make_agent(start=1.0, n_actions=4)
    for a in IDS:
        agent.tables[a].values[agent.tables[a].row((0.0,))] = [0.0, 0.0, 5.0, 0.0]
    obs = {a: np.zeros((2000, 1), dtype=np.float32) for a in IDS}
    greedy_actions = agent.act(obs, explore=False).actions
    assert all(np.all(greedy_actions[a] == 2) for a in IDS)
    explored = agent.act(obs, explore=True).actions["a"]
    assert all(400 < c < 600 for c in np.bincount(explored, minlength=4))
    unseen = agent.act({a: np.full((2000, 1), 9.0, dtype=np.float32) for a in IDS}, explore=False).actions["b"]
    assert all(400 < c < 600 for c in np.bincount(unseen, minlength=4))  # zeros everywhere: random ties


def test_agent_state_restores_tables_exploration_and_random_stream():
    agent = make_agent(start=0.5)
    learner = IQLLearner(agent, alpha=0.5, gamma=0.9)
    rng = np.random.default_rng(0)
    for _ in range(50):
        o, n = rng.integers(0, 4, size=2), rng.integers(0, 4, size=2)
        learner.learn(step(obs=tuple(o), actions=tuple(rng.integers(0, 3, size=2)),
                           rewards=tuple(rng.normal(size=2)), next_obs=tuple(n)))
    agent.on_progress(10, 3)
    twin = make_agent(start=0.5, seed=123)
    twin.load_state_dict(agent.state_dict())
    assert twin.metrics() == agent.metrics()
    obs = {a: rng.integers(0, 4, size=(64, 1)).astype(np.float32) for a in IDS}
    for explore in (True, False):
        mine, theirs = agent.act(obs, explore=explore).actions, twin.act(obs, explore=explore).actions
        assert all(np.array_equal(mine[a], theirs[a]) for a in IDS)


def test_load_refuses_a_checkpoint_without_a_table_for_an_agent():
    state = make_agent().state_dict()
    del state["tables"]["b"]
    with pytest.raises(ValueError, match="no Q-table for agent"):
        make_agent().load_state_dict(state)


def test_builder_reads_the_env_spec():
    spec = EnvSpec("toy", IDS, {a: spaces.Box(0, 3, (1,)) for a in IDS}, {a: spaces.Discrete(4) for a in IDS},
                   True, 1, {})
    context = BuildContext(spec, IQLConfig(), RunConfig(algorithm="iql", env="toy"), 7, "cpu")
    agent = build_agent(context)
    learner = build_learner(context, agent)
    assert agent.n_actions == {"a": 4, "b": 4} and learner.alpha == 0.1 and learner.gamma == 0.99


def test_weights_for_actor_copies_leave_the_action_random_stream_alone():
    agent = make_agent(start=0.5)
    agent.tables["a"].values[agent.tables["a"].row((2.0,))] = [0.0, 1.0, 0.0]
    agent.on_progress(1, 1)
    weights = agent.weights()
    assert "rng" not in weights and IQLLearner(agent, 0.1, 0.9).weights().keys() == weights.keys()
    actor = make_agent(start=0.5, seed=7)
    stream = actor.rng.getstate()
    actor.load_state_dict(weights)
    assert actor.rng.getstate() == stream
    assert actor.tables["a"].q((2.0,)).tolist() == [0.0, 1.0, 0.0] and actor.metrics() == agent.metrics()


def test_agent_batches_act_and_learn_exactly_as_plain_dicts():
    """The stacked path (rlf.AgentBatch, one array for all agents) and the per-agent dict path
    draw the same actions from the same stream and make the same updates."""
    from rlf import AgentBatch

    rng = np.random.default_rng(0)
    agents = {kind: make_agent(start=0.5, end=0.5, seed=3) for kind in ("plain", "stacked")}
    learners = {kind: IQLLearner(agent, 0.3, 0.9) for kind, agent in agents.items()}

    def both(array, dtype):
        array = np.asarray(array, dtype=dtype)
        return {"plain": {a: array[r].copy() for r, a in enumerate(IDS)}, "stacked": AgentBatch.of(IDS, array)}

    obs = rng.integers(4, size=(2, 3, 1))  # 2 agents, 3 envs, 1 feature: few states, many revisits
    for _ in range(400):
        current = both(obs, np.float32)
        acted = {kind: agents[kind].act(current[kind]) for kind in agents}
        assert isinstance(acted["stacked"].actions, AgentBatch)
        for a in IDS:
            np.testing.assert_array_equal(acted["plain"].actions[a], acted["stacked"].actions[a])
        following = rng.integers(4, size=(2, 3, 1))
        rewards = both(rng.normal(size=(2, 3)), np.float32)
        terminated = both(rng.random((2, 3)) < 0.1, bool)
        truncated = both(np.zeros((2, 3)), bool)
        alive = both(rng.random((2, 3)) < 0.8, bool)
        nxt = both(following, np.float32)
        ended = np.zeros(3, dtype=bool)
        reports = {kind: learners[kind].learn(Transitions(
            current[kind], acted[kind].actions, rewards[kind], nxt[kind], terminated[kind], truncated[kind],
            alive[kind], ended)) for kind in agents}
        assert reports["plain"] == pytest.approx(reports["stacked"])
        obs = following
    for a in IDS:
        plain, stacked = agents["plain"].tables[a], agents["stacked"].tables[a]
        assert plain.index == stacked.index and len(plain) > 3
        np.testing.assert_array_equal(plain.values[:len(plain)], stacked.values[:len(stacked)])
    assert agents["plain"].rng.getstate() == agents["stacked"].rng.getstate()


def test_an_agent_batch_is_a_dict_of_views_and_pickles_as_a_plain_dict():
    import pickle

    from rlf import AgentBatch

    stacked = np.arange(6, dtype=np.float32).reshape(2, 3)
    batch = AgentBatch.of(IDS, stacked)
    assert list(batch) == list(IDS) and batch.ids is IDS and batch.stacked is stacked
    assert all(np.shares_memory(batch[a], stacked) for a in IDS)
    np.testing.assert_array_equal(batch["b"], [3, 4, 5])
    copy = pickle.loads(pickle.dumps(batch))
    assert type(copy) is dict and list(copy) == list(IDS)
    np.testing.assert_array_equal(copy["a"], [0, 1, 2])

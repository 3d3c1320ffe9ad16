"""Subprocess envs step in parts (groups of workers), and the on-policy strategy acts on one part
while another steps. Both must be invisible in the results: the same observations, rewards and
rollouts as stepping everything at once in this process."""

import numpy as np
import pytest
from support import LinearPolicy

from rlf import SINGLE_AGENT
from rlf.envs import EnvFactory, GymVector, StepBatch
from rlf.envs.gym import GymEnvConfig, make_gym_env
from rlf.training.episodes import EpisodeTracker
from rlf.training.on_policy import collect_rollout

FACTORY = EnvFactory(make_gym_env, GymEnvConfig(id="CartPole-v1"))
FIELDS = ("obs", "next_obs", "rewards", "terminated", "truncated", "alive")


def assert_same_batch(a: StepBatch, b: StepBatch) -> None:
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(a, name)[SINGLE_AGENT], getattr(b, name)[SINGLE_AGENT], err_msg=name)
    np.testing.assert_array_equal(a.episode_ended, b.episode_ended)
    np.testing.assert_array_equal(a.reward_matrix, b.reward_matrix)
    assert a.ended_envs == b.ended_envs
    assert a.episode_metrics == b.episode_metrics


@pytest.fixture
def vectors():
    made = [GymVector("gym:CartPole-v1", FACTORY, 3, subprocess=True),
            GymVector("gym:CartPole-v1", FACTORY, 3, subprocess=False)]
    yield made
    for vector in made:
        vector.close()


def test_subprocess_envs_step_in_parts_exactly_like_in_process_envs(vectors):
    workers, local = vectors
    assert workers.parts == [slice(0, 2), slice(2, 3)] and local.parts == [slice(0, 3)]
    np.testing.assert_array_equal(workers.reset(seed=5)[SINGLE_AGENT], local.reset(seed=5)[SINGLE_AGENT])
    rng = np.random.default_rng(0)
    ended = 0
    for step in range(120):  # random play ends CartPole episodes every ~20 steps: autoresets included
        actions = {SINGLE_AGENT: rng.integers(0, 2, size=3)}
        expected = local.step(actions)
        if step % 2:
            got = workers.step(actions)
        else:  # part by part, the second part sent before the first is collected
            for index, rows in enumerate(workers.parts):
                workers.step_async(index, {SINGLE_AGENT: actions[SINGLE_AGENT][rows]})
            got = StepBatch.concat([workers.step_wait(index) for index in range(len(workers.parts))])
        assert_same_batch(got, expected)
        ended += len(got.ended_envs)
    assert ended >= 10


class GreedyLinear(LinearPolicy):
    """Acts greedily on fixed random weights: a deterministic function of the observation."""

    def __init__(self, spec, rows_independent):
        super().__init__(spec, seed=0)
        self.rows_independent = rows_independent
        self.calls = []
        weights = np.random.default_rng(1)
        for params in self.params.values():
            params["pi"] = weights.normal(size=params["pi"].shape)
            params["v"] = weights.normal(size=params["v"].shape)

    def act(self, obs, *, explore=True):
        self.calls.append(len(obs[SINGLE_AGENT]))
        return super().act(obs, explore=False)


def test_acting_on_one_part_while_the_other_steps_gives_the_same_rollout(vectors):
    workers, _ = vectors
    rollouts = []
    for rows_independent in (False, True):
        agent = GreedyLinear(workers.spec, rows_independent)
        obs = workers.reset(seed=3)
        tracker = EpisodeTracker(workers.spec.agent_ids, 3, False)
        rollout, last_obs, episodes = collect_rollout(workers, agent, obs, 50, tracker, 0.99, 0.95)
        rollouts.append((rollout, last_obs, episodes))
        # one call per vector step, or one per part and step when acting overlaps stepping
        assert agent.calls == ([2, 1] * 50 if rows_independent else [3] * 50)
    (sequential, last_a, episodes_a), (pipelined, last_b, episodes_b) = rollouts
    for name in ("obs", "next_obs", "actions", "rewards", "terminated", "dones", "alive", "values",
                 "next_values", "advantages", "returns"):
        np.testing.assert_array_equal(getattr(sequential, name)[SINGLE_AGENT], getattr(pipelined, name)[SINGLE_AGENT],
                                      err_msg=name)
    np.testing.assert_array_equal(last_a[SINGLE_AGENT], last_b[SINGLE_AGENT])
    assert episodes_a == episodes_b and episodes_a


def test_concat_keeps_env_indices_of_later_parts():
    def part(n, ended, metrics):
        flags = np.zeros(n, dtype=bool)
        flags[ended] = True
        rewards = np.arange(n, dtype=np.float32)
        return StepBatch(*({SINGLE_AGENT: np.zeros((n, 2))} for _ in range(2)), {SINGLE_AGENT: rewards},
                         {SINGLE_AGENT: flags}, {SINGLE_AGENT: np.zeros(n, dtype=bool)},
                         {SINGLE_AGENT: np.ones(n, dtype=bool)}, flags, ended, rewards[None], metrics)

    joined = StepBatch.concat([part(2, [1], {1: {"x": 1.0}}), part(3, [0, 2], {2: {"x": 2.0}})])
    assert joined.ended_envs == [1, 2, 4]
    assert joined.episode_metrics == {1: {"x": 1.0}, 4: {"x": 2.0}}
    np.testing.assert_array_equal(joined.rewards[SINGLE_AGENT], [0, 1, 0, 1, 2])
    assert joined.reward_matrix.shape == (1, 5)

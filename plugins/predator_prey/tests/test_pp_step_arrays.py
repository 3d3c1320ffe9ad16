"""rlf's batched step protocol: ``step_arrays`` is ``step`` without the dicts (same outcome, same RNG
stream), and the core's ParallelVector gives the same batches through either."""

import numpy as np
import pytest
from rlf_plugin_predator_prey import parallel_env

from rlf.envs import EnvFactory, ParallelVector

SCENARIOS = [
    {"scenario": "chase-1v1", "learners": "all"},
    {"scenario": "grid-3v3", "learners": "all", "obstacle_share": 0.2},  # captures leave agents out
    {"scenario": "grid-3v3", "learners": "prey", "opponent_policy": "chase", "opponent_noise": 0.2},
    {"scenario": "grid-3v3", "observation": "local", "learners": "all"},
]


@pytest.mark.parametrize("fields", SCENARIOS)
def test_step_arrays_is_step_without_the_dicts(fields):
    by_dict, by_arrays = parallel_env(**fields), parallel_env(**fields)
    by_dict.reset(seed=3)
    by_arrays.reset(seed=3)
    ids = by_dict.possible_agents
    zero = np.zeros(by_dict.observation_space(ids[0]).shape, dtype=np.float32)
    rng = np.random.default_rng(0)
    episodes = partial = 0
    for _ in range(600):
        actions = rng.integers(5, size=len(ids)).tolist()
        present = list(by_dict.agents)
        assert by_arrays.agents == present
        obs, rew, term, trunc, infos = by_dict.step({a: actions[k] for k, a in enumerate(ids) if a in present})
        rows, rewards, terminated, truncated, alive, metrics = by_arrays.step_arrays(actions)
        assert alive == [a in present for a in ids]
        partial += not all(alive)
        assert rows.dtype == np.float32 and rows.shape == (len(ids), *zero.shape)
        for k, a in enumerate(ids):
            np.testing.assert_array_equal(rows[k], obs.get(a, zero))
            assert (rewards[k], terminated[k], truncated[k]) == (rew.get(a, 0.0), term.get(a, False),
                                                                  trunc.get(a, False))
        expected = next((info["episode_metrics"] for info in infos.values() if "episode_metrics" in info), None)
        assert metrics == expected
        assert by_arrays.agents == by_dict.agents
        assert by_arrays.positions() == by_dict.positions()
        if not by_dict.agents:
            episodes += 1
            by_dict.reset()
            by_arrays.reset()
    assert episodes >= 2
    assert by_arrays.get_state()["rng"] == by_dict.get_state()["rng"]  # the same draws, scripted moves included
    if fields["scenario"] == "grid-3v3" and fields["learners"] == "all":
        assert partial  # steps with captured prey (left out: zeros, not alive) were compared


class DictOnly:
    """The same env seen without the protocol: what a third-party PettingZoo env looks like."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        if name == "step_arrays":
            raise AttributeError(name)
        return getattr(self._env, name)


def batches(vector, steps, seed):
    rng = np.random.default_rng(seed)
    ids = vector.spec.agent_ids
    out = [vector.reset(seed=seed)]
    for _ in range(steps):
        actions = {a: rng.integers(5, size=vector.num_envs) for a in ids}
        out.append(vector.step(actions))
    return out


@pytest.mark.parametrize("num_envs", [1, 3])
@pytest.mark.parametrize("fields", SCENARIOS[:2])
def test_parallel_vector_gives_the_same_batches_with_and_without_the_protocol(fields, num_envs):
    def factory(wrap):
        return EnvFactory(lambda config: wrap(parallel_env(**config)), fields)

    fast = ParallelVector("pp", factory(lambda env: env), num_envs)
    plain = ParallelVector("pp", factory(DictOnly), num_envs)
    assert fast._batched and not plain._batched
    ended = 0
    for one, other in zip(batches(fast, 450, 1), batches(plain, 450, 1), strict=True):
        if isinstance(one, dict):  # the reset observations
            assert one.keys() == other.keys() and all((one[a] == other[a]).all() for a in one)
            continue
        for name in ("obs", "next_obs", "rewards", "terminated", "truncated", "alive"):
            mine, theirs = getattr(one, name), getattr(other, name)
            assert list(mine) == list(theirs) == list(fast.spec.agent_ids)
            for a in mine:
                np.testing.assert_array_equal(mine[a], theirs[a], err_msg=f"{name}[{a}]")
                assert mine[a].dtype == theirs[a].dtype
            # both hand out AgentBatches: one (agents, N, ...) array behind the per-agent arrays
            np.testing.assert_array_equal(mine.stacked, np.stack([mine[a] for a in mine]))
        np.testing.assert_array_equal(one.episode_ended, other.episode_ended)
        np.testing.assert_array_equal(one.reward_matrix, other.reward_matrix)
        assert one.ended_envs == other.ended_envs and one.episode_metrics == other.episode_metrics
        ended += len(one.ended_envs)
    assert ended >= 2


def test_a_step_arrays_of_the_wrong_shape_is_one_line_naming_the_env():
    from rlf import PluginError

    class Broken(DictOnly):
        def step_arrays(self, actions):
            rows, *rest = self._env.step_arrays(actions)
            return (rows[:, :1], *rest)

    vector = ParallelVector("broken-pp", EnvFactory(lambda config: Broken(parallel_env(**config)),
                                                    {"scenario": "chase-1v1", "learners": "all"}), 1)
    vector.reset(seed=0)
    with pytest.raises(PluginError, match=r"broken-pp's step_arrays returned observations \(2, 1\) float32, "
                                          r"expected an array \(2, 2\) float32"):
        vector.step({a: np.zeros(1, dtype=np.int64) for a in vector.spec.agent_ids})

"""The PettingZoo parallel API, spaces and the metadata rlf reads."""

import warnings

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test
from rlf_plugin_predator_prey import ObservationEncoder

CONFIGS = [
    {},
    {"scenario": "chase-1v1"},
    {"scenario": "grid-3v3", "learners": "all"},
    {"scenario": "grid-3v3", "learners": "prey", "opponent_policy": "chase", "capture_threshold": 2},
    {"scenario": "sparse-10x10"},
    {"scenario": "grid-3v3", "observation": "local", "obs_position": True, "obs_teammates": 2, "obs_opponents": 3},
]


@pytest.mark.parametrize("fields", CONFIGS)
def test_parallel_api(make, fields):
    env = make(**fields)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the API test only warns on agents missing from the step dicts
        parallel_api_test(env, num_cycles=400)


@pytest.mark.parametrize("fields", CONFIGS[1:4])
def test_parallel_seed_test(fields):
    from functools import partial

    from rlf_plugin_predator_prey import parallel_env

    parallel_seed_test(partial(parallel_env, **fields))


@pytest.mark.parametrize("fields", CONFIGS)
def test_observations_stay_in_their_space(make, fields):
    env = make(**fields)
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(300):
        for agent, value in obs.items():
            space = env.observation_space(agent)
            assert value.dtype == np.float32 and value.shape == space.shape
            assert space.contains(value), (agent, value)
            assert np.array_equal(value, np.round(value))
        obs, *_ = env.step({a: int(rng.integers(5)) for a in env.agents})
        if not env.agents:
            obs, _ = env.reset()
    assert env.state_space.contains(env.state())


@pytest.mark.parametrize(("learners", "expected"), [
    ("predators", ["predator_0", "predator_1"]),
    ("prey", ["prey_0", "prey_1", "prey_2"]),
    ("all", ["predator_0", "predator_1", "prey_0", "prey_1", "prey_2"]),
])
def test_only_learners_are_agents(make, learners, expected):
    env = make(size=6, n_predators=2, n_prey=3, learners=learners)
    assert env.possible_agents == expected
    obs, infos = env.reset(seed=0)
    assert env.agents == expected and set(obs) == set(expected) == set(infos)
    assert env.rlf_metadata["teams"] == {a: a.split("_")[0] for a in expected}
    assert all(env.action_space(a).n == 5 for a in expected)


def test_metadata_for_rlf(make):
    env = make(scenario="sparse-10x10")
    meta = env.rlf_metadata
    assert isinstance(meta["encoder"], ObservationEncoder)
    assert meta["state_dim"] == meta["encoder"].state_dim == env.observation_space("predator_0").shape[0] == 2
    assert meta["observation_fields"] == ("opp0_dx", "opp0_dy")
    assert meta["teams"] == {"predator_0": "predator"}
    assert meta["opponent_policy"] == "random" and meta["learners"] == "predators"


def test_invalid_render_mode_and_step_after_end(make):
    with pytest.raises(ValueError, match="render_mode"):
        make(render_mode="video")
    env = make(max_steps=1)
    env.reset(seed=0)
    env.step({})
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


def test_bad_actions_raise(make):
    env = make()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="not in 0..4"):
        env.step({"predator_0": 5})
    with pytest.raises(ValueError, match="unknown agent"):
        env.step({"prey_0": 0})  # prey do not learn by default
    obs, *_ = env.step({"predator_0": np.int64(4)})  # numpy ints are fine
    assert "predator_0" in obs

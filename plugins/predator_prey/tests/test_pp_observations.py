"""The observation schema of each mode, and the encoder tabular and neural learners use."""

import numpy as np
import pytest
from pp_support import pinned

RIGHT, UP, LEFT, DOWN, STAY = range(5)


def test_relative_offsets_to_the_nearest_opponent(make):
    env = make(size=10)
    obs, _ = pinned(env, [(2, 3)], [(7, 1)])
    assert obs["predator_0"].tolist() == [5.0, -2.0]
    env = make(size=10, learners="prey")
    obs, _ = pinned(env, [(2, 3)], [(7, 1)])
    assert obs["prey_0"].tolist() == [-5.0, 2.0]


def test_relative_full_schema_order_and_clipping(make):
    env = make(size=10, n_predators=2, n_prey=3, obs_position=True, obs_opponents=2, obs_teammates=1,
               obs_blocked=True, offset_clip=3)
    assert env.encoder.fields == ("x", "y", "opp0_dx", "opp0_dy", "opp1_dx", "opp1_dy", "mate0_dx", "mate0_dy",
                                  "blocked_right", "blocked_up", "blocked_left", "blocked_down")
    obs, _ = pinned(env, [(0, 0), (0, 9)], [(1, 0), (6, 2), (0, 5)], obstacles=[(0, 1)])
    #            x  y  nearest prey  2nd nearest (0,5) clipped  mate (0,9) clipped  right up left down
    expected = [0, 0, 1, 0, 0, 3, 0, 3, 0, 1, 1, 1]
    assert obs["predator_0"].tolist() == expected
    low, high = env.observation_space("predator_0").low, env.observation_space("predator_0").high
    assert low.tolist() == [0, 0, -3, -3, -3, -3, -3, -3, 0, 0, 0, 0]
    assert high.tolist() == [9, 9, 4, 4, 4, 4, 4, 4, 1, 1, 1, 1]


def test_missing_agents_read_as_clip_plus_one(make):
    env = make(size=6, n_prey=2, capture_threshold=2, obs_opponents=2, opponent_policy="stay")
    pinned(env, [(0, 0)], [(1, 0), (5, 5)], obstacles=[])
    obs, *_ = env.step({"predator_0": RIGHT})  # catches prey_0
    assert obs["predator_0"].tolist() == [4, 5, 6, 6]


def test_captured_prey_last_observation_sees_its_captor(make):
    env = make(size=6, n_prey=2, capture_threshold=2, learners="all")
    pinned(env, [(0, 0)], [(1, 0), (5, 5)])
    obs, _, term, *_ = env.step({"predator_0": RIGHT})
    assert term["prey_0"] and obs["prey_0"].tolist() == [0, 0]


def test_local_view_codes(make):
    env = make(size=5, n_predators=2, n_prey=2, observation="local", view_radius=1, obs_opponents=1)
    assert env.encoder.state_dim == 9 + 2
    obs, _ = pinned(env, [(0, 1), (1, 1)], [(0, 2), (4, 4)], obstacles=[(1, 0)])
    # predator_0 at (0, 1); rows top first: y=2, 1, 0; columns x=-1, 0, 1
    view = obs["predator_0"][:9].reshape(3, 3).tolist()
    assert view == [[1, 3, 0],   # outside, the prey at (0, 2), free
                    [1, 0, 2],   # outside, itself, the teammate at (1, 1)
                    [1, 0, 1]]   # outside, free, the obstacle at (1, 0)
    assert obs["predator_0"][9:].tolist() == [0, 1]


def test_local_view_forgets_captured_prey(make):
    env = make(size=5, n_predators=2, n_prey=2, capture_threshold=2, learners="prey", observation="local",
               view_radius=1, opponent_policy="stay")
    obs, _ = pinned(env, [(3, 3), (0, 0)], [(2, 2), (3, 4)])
    assert obs["prey_0"][:9].reshape(3, 3).tolist() == [[0, 0, 3], [0, 0, 0], [0, 0, 0]]
    assert obs["prey_1"][:9].reshape(3, 3).tolist() == [[1, 1, 1], [0, 0, 0], [0, 3, 0]]
    obs, *_ = env.step({"prey_1": DOWN})  # onto the predator at (3, 3): captured
    assert env.captures == 1 and env.agents == ["prey_0"]
    assert obs["prey_0"][:9].reshape(3, 3).tolist() == [[0, 0, 3], [0, 0, 0], [0, 0, 0]]
    env.step({"prey_0": LEFT})
    obs, *_ = env.step({"prey_0": RIGHT})
    assert obs["prey_0"][:9].reshape(3, 3).tolist() == [[0, 0, 3], [0, 0, 0], [0, 0, 0]]  # no trace of prey_1


def test_blocked_flags_follow_walls_and_obstacles(make):
    env = make(size=4, obs_blocked=True)
    obs, _ = pinned(env, [(3, 3)], [(0, 0)], obstacles=[(2, 3)])
    assert obs["predator_0"][-4:].tolist() == [1, 1, 1, 0]


def test_encoder_vector_and_hashable(make):
    env = make(scenario="grid-3v3")
    encoder = env.rlf_metadata["encoder"]
    obs, _ = env.reset(seed=0)
    value = obs["predator_0"]
    vector = encoder.vector(value)
    assert vector.dtype == np.float32 and vector.shape == (encoder.state_dim,)
    key = encoder.hashable(value)
    assert isinstance(key, tuple) and all(type(v) is int for v in key) and len(key) == encoder.state_dim
    assert hash(key) == hash(encoder.hashable(value.copy()))
    batch = np.stack([obs[a] for a in env.agents])
    assert encoder.hashable_batch(batch) == [encoder.hashable(obs[a]) for a in env.agents]


@pytest.mark.parametrize("bad", [np.zeros(3), np.zeros((2, 8)), np.zeros(9), []])
def test_encoder_rejects_wrong_lengths(make, bad):
    encoder = make(scenario="grid-3v3").encoder
    assert encoder.state_dim == 8
    with pytest.raises(ValueError, match="expected"):
        encoder.vector(bad)
    with pytest.raises(ValueError, match="expected"):
        encoder.hashable(bad)
    with pytest.raises(ValueError, match="expected"):
        encoder.hashable_batch(np.zeros((2, 3)))


def test_state_is_global(make):
    env = make(size=4, n_predators=2)
    pinned(env, [(0, 0), (1, 2)], [(3, 3)], obstacles=[(2, 2)])
    state = env.state()
    assert state[:9].tolist() == [0, 0, 1, 1, 2, 1, 3, 3, 1]
    assert state[9:].reshape(4, 4)[2, 2] == 1 and state[9:].sum() == 1

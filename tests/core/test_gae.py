import numpy as np
import pytest

from rlf import compute_gae


def test_one_step_reduces_to_td_error():
    adv, ret = compute_gae(np.array([[1.0]]), np.array([[0.5]]), np.array([[2.0]]), np.array([[False]]),
                           np.array([[False]]), gamma=0.9, gae_lambda=0.95)
    assert adv[0, 0] == pytest.approx(1.0 + 0.9 * 2.0 - 0.5)
    assert ret[0, 0] == pytest.approx(adv[0, 0] + 0.5)


def test_terminal_cuts_the_bootstrap_but_truncation_keeps_it():
    rewards = np.array([[1.0, 1.0]])
    values = np.array([[0.0, 0.0]])
    next_values = np.array([[10.0, 10.0]])   # V(final observation)
    terminated = np.array([[True, False]])
    dones = np.array([[True, True]])          # env 0 terminated, env 1 truncated
    adv, _ = compute_gae(rewards, values, next_values, terminated, dones, gamma=0.5, gae_lambda=1.0)
    assert adv[0, 0] == pytest.approx(1.0)            # no bootstrap after a true terminal
    assert adv[0, 1] == pytest.approx(1.0 + 0.5 * 10)  # a timeout still bootstraps from V(final obs)


def test_episode_end_stops_advantage_leaking_into_the_previous_episode():
    rewards = np.array([[0.0], [0.0], [100.0]])
    values = np.zeros((3, 1))
    next_values = np.zeros((3, 1))
    dones = np.array([[False], [True], [False]])
    adv, _ = compute_gae(rewards, values, next_values, dones, dones, gamma=1.0, gae_lambda=1.0)
    assert adv[2, 0] == pytest.approx(100.0)
    assert adv[1, 0] == pytest.approx(0.0) and adv[0, 0] == pytest.approx(0.0)


def test_matches_a_direct_lambda_return():
    rng = np.random.default_rng(0)
    T, gamma, lam = 6, 0.9, 0.8
    r, v = rng.normal(size=(T, 1)), rng.normal(size=(T, 1))
    last = rng.normal()
    nv = np.concatenate([v[1:], [[last]]])
    zeros = np.zeros((T, 1), dtype=bool)
    adv, _ = compute_gae(r, v, nv, zeros, zeros, gamma, lam)
    deltas = r[:, 0] + gamma * nv[:, 0] - v[:, 0]
    expected = [sum((gamma * lam) ** k * deltas[t + k] for k in range(T - t)) for t in range(T)]
    np.testing.assert_allclose(adv[:, 0], expected, rtol=1e-5)

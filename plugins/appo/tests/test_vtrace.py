"""V-trace (vtrace.py) against a direct evaluation of the paper's definition, one target at a time:

    v_s = V(x_s) + sum_{t=s}^{e} gamma^(t-s) (prod_{i=s}^{t-1} c_i) rho_t (r_t + gamma V(x_{t+1}) - V(x_t))

where e is the end of the episode (or of the batch) that s is in, V(x_{t+1}) is 0 after a terminal
and the final observation's value after a truncation."""

import numpy as np
import pytest
from rlf_plugin_appo.vtrace import vtrace


def reference(behaviour, target, rewards, values, next_values, terminated, dones, gamma, lam, rho_bar, c_bar):
    steps, width = rewards.shape
    vs = np.zeros((steps, width))
    advantages = np.zeros((steps, width))
    for b in range(width):
        for s in range(steps):
            total = values[s, b]
            for t in range(s, steps):
                ratio = np.exp(target[t, b] - behaviour[t, b])
                bootstrap = 0.0 if terminated[t, b] else next_values[t, b]
                delta = min(rho_bar, ratio) * (rewards[t, b] + gamma * bootstrap - values[t, b])
                trace = 1.0
                for i in range(s, t):
                    trace *= lam * min(c_bar, np.exp(target[i, b] - behaviour[i, b]))
                total += gamma ** (t - s) * trace * delta
                if dones[t, b]:
                    break
            vs[s, b] = total
    for b in range(width):
        for s in range(steps):
            if terminated[s, b]:
                following = 0.0
            elif dones[s, b] or s == steps - 1:
                following = next_values[s, b]
            else:
                following = vs[s + 1, b]
            advantages[s, b] = rewards[s, b] + gamma * following - values[s, b]
    return vs, advantages


def random_batch(rng, steps=9, width=4, end_rate=0.15):
    behaviour = np.log(rng.uniform(0.05, 1.0, (steps, width)))
    target = behaviour + rng.normal(0.0, 0.6, (steps, width))
    rewards = rng.normal(size=(steps, width))
    values = rng.normal(size=(steps, width))
    next_values = np.concatenate([values[1:], rng.normal(size=(1, width))])
    terminated = rng.random((steps, width)) < end_rate
    truncated = ~terminated & (rng.random((steps, width)) < end_rate)
    dones = terminated | truncated
    # after an episode end the next row belongs to a new episode: V of the final observation differs
    next_values = np.where(dones, rng.normal(size=(steps, width)), next_values)
    return behaviour, target, rewards, values, next_values, terminated, dones


@pytest.mark.parametrize("gamma,lam,rho_bar,c_bar", [(0.99, 1.0, 1.0, 1.0), (0.9, 0.95, 1.0, 0.8),
                                                      (0.97, 1.0, 2.0, 1.5), (0.5, 0.7, 0.6, 0.3)])
def test_vtrace_matches_the_definition(gamma, lam, rho_bar, c_bar):
    rng = np.random.default_rng(int(gamma * 1000 + rho_bar * 10))
    for _ in range(5):
        batch = random_batch(rng)
        result = vtrace(*batch, gamma=gamma, lam=lam, rho_bar=rho_bar, c_bar=c_bar)
        vs, advantages = reference(*batch, gamma, lam, rho_bar, c_bar)
        np.testing.assert_allclose(result.vs, vs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result.advantages, advantages, rtol=1e-5, atol=1e-5)
        ratios = np.exp(batch[1] - batch[0])
        np.testing.assert_allclose(result.clipped_rhos, np.minimum(rho_bar, ratios), rtol=1e-5)


def test_on_policy_vtrace_is_the_bootstrapped_n_step_return():
    """rho = c = 1 everywhere (the actor's weights were the learner's), lambda 1, no episode end:
    v_s = sum_k gamma^k r_{s+k} + gamma^(T-s) V(x_T)."""
    rng = np.random.default_rng(3)
    steps, width, gamma = 12, 3, 0.95
    log_probs = np.log(rng.uniform(0.1, 1.0, (steps, width)))
    rewards = rng.normal(size=(steps, width))
    values = rng.normal(size=(steps, width))
    last = rng.normal(size=width)
    next_values = np.concatenate([values[1:], last[None]])
    no_end = np.zeros((steps, width), bool)
    result = vtrace(log_probs, log_probs, rewards, values, next_values, no_end, no_end, gamma=gamma)
    for s in range(steps):
        expected = sum(gamma ** k * rewards[s + k] for k in range(steps - s)) + gamma ** (steps - s) * last
        np.testing.assert_allclose(result.vs[s], expected, rtol=1e-5, atol=1e-5)


def test_terminated_cuts_the_bootstrap_truncated_keeps_it():
    """One column, an episode end after step 1 of 3: terminated bootstraps nothing, truncated
    bootstraps from the final observation's value; neither lets step 2 (the next episode) reach back."""
    gamma = 0.9
    zeros = np.zeros((3, 1))
    rewards = np.array([[1.0], [2.0], [4.0]])
    values = np.array([[0.5], [0.25], [3.0]])
    final_value, last_value = 10.0, 7.0
    next_values = np.array([[0.25], [final_value], [last_value]])
    ended = np.array([[False], [True], [False]])
    cut = vtrace(zeros, zeros, rewards, values, next_values, ended, ended, gamma=gamma)
    kept = vtrace(zeros, zeros, rewards, values, next_values, zeros.astype(bool), ended, gamma=gamma)
    np.testing.assert_allclose(cut.vs[:, 0], [1.0 + gamma * 2.0, 2.0, 4.0 + gamma * last_value], rtol=1e-6)
    np.testing.assert_allclose(kept.vs[:, 0], [1.0 + gamma * (2.0 + gamma * final_value), 2.0 + gamma * final_value,
                                               4.0 + gamma * last_value], rtol=1e-6)
    # the step after the end is the same either way: nothing flows backwards across the boundary
    assert cut.vs[2, 0] == kept.vs[2, 0]
    np.testing.assert_allclose(cut.advantages[1, 0], 2.0 - 0.25, rtol=1e-6)
    np.testing.assert_allclose(kept.advantages[1, 0], 2.0 + gamma * final_value - 0.25, rtol=1e-6)


def test_truncation_limits_what_an_off_policy_step_contributes():
    """A step the learner's policy likes far more than the behaviour did (ratio 5) counts at rho_bar."""
    gamma = 1.0
    behaviour = np.log(np.array([[0.1]]))
    target = np.log(np.array([[0.5]]))
    rewards, values, next_values = np.array([[1.0]]), np.array([[0.0]]), np.array([[0.0]])
    ends = np.array([[True]])
    for rho_bar in (1.0, 2.0, 10.0):
        result = vtrace(behaviour, target, rewards, values, next_values, ends, ends, gamma=gamma, rho_bar=rho_bar,
                        c_bar=1.0)
        np.testing.assert_allclose(result.vs[0, 0], min(rho_bar, 5.0) * 1.0, rtol=1e-6)

"""V-trace targets (Espeholt et al. 2018, "IMPALA", section 4.1) for arrays shaped (T, B), in numpy.

Kept free of torch so the maths can be checked on its own (tests/test_vtrace.py compares it with a
direct evaluation of the paper's sum). The learner computes it on detached values: the targets are
regression targets, not a path for gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class VTrace:
    vs: np.ndarray
    """(T, B) value targets v_s."""
    advantages: np.ndarray
    """(T, B) policy-gradient advantages r_s + gamma * v_{s+1} - V(x_s) (see ``vtrace``)."""
    clipped_rhos: np.ndarray
    """(T, B) min(rho_bar, pi/mu): the truncated importance weights the temporal differences used."""


def vtrace(behaviour_log_probs: np.ndarray, target_log_probs: np.ndarray, rewards: np.ndarray,
           values: np.ndarray, next_values: np.ndarray, terminated: np.ndarray, dones: np.ndarray, *,
           gamma: float, lam: float = 1.0, rho_bar: float = 1.0, c_bar: float = 1.0) -> VTrace:
    """V-trace for one batch of trajectories.

    ``values[t]`` is V(x_t), ``next_values[t]`` V of the observation step t led to: at an episode end
    the final observation, so a truncation bootstraps from where the episode was cut. A ``terminated``
    step bootstraps nothing; any episode end (``dones``: terminated or truncated) cuts the trace, so
    no correction flows from one episode into the one after it in the same column.

    The advantages carry no rho factor: APPO multiplies them by the (clipped) ratio pi/mu in PPO's
    surrogate, which is already the importance weight; IMPALA's rho_s * (...) would count it twice.
    """
    rhos = np.exp(np.asarray(target_log_probs, np.float64) - np.asarray(behaviour_log_probs, np.float64))
    clipped_rhos = np.minimum(rho_bar, rhos)
    cs = lam * np.minimum(c_bar, rhos)
    rewards = np.asarray(rewards, np.float64)
    values = np.asarray(values, np.float64)
    next_values = np.asarray(next_values, np.float64)
    bootstrap = gamma * (1.0 - np.asarray(terminated, np.float64))
    carry = gamma * (1.0 - np.asarray(dones, np.float64))
    deltas = clipped_rhos * (rewards + bootstrap * next_values - values)
    corrections = np.zeros_like(values)
    running = np.zeros(values.shape[1:], np.float64)
    for t in range(values.shape[0] - 1, -1, -1):
        running = deltas[t] + carry[t] * cs[t] * running
        corrections[t] = running
    vs = values + corrections
    # v_{s+1}: the next target within the episode; at an episode end (or the batch's end) V(x_{s+1})
    next_vs = np.concatenate([vs[1:], next_values[-1:]], axis=0)
    next_vs = np.where(np.asarray(dones, bool), next_values, next_vs)
    advantages = rewards + bootstrap * next_vs - values
    return VTrace(vs.astype(np.float32), advantages.astype(np.float32), clipped_rhos.astype(np.float32))

"""PPO has one definition of its update (loss.py, run by the default torch backend) and one opt-in fast
path (``algo.backend="numpy"``, the same maths derived by hand). Every config field is classified
here: a field that shapes the update must change both backends' result in the same way, or the numpy
backend must refuse it. A field added to PPOConfig without being classified fails the first test."""

from __future__ import annotations

import numpy as np
import pytest
from ppo_helpers import fake_rollout, make_pair, single_spec, weights
from rlf_plugin_ppo import PPOConfig

import rlf
from rlf import ConfigError

# field -> a value other than the default that the update must honour (each differs from the default)
UPDATE_FIELDS = {
    "lr": 0.03,
    "anneal_lr": False,
    "schedule_steps": 500,
    "adam_eps": 1e-3,
    "epochs": 2,
    "minibatches": 2,
    "clip_coef": 0.05,
    "anneal_clip": True,
    "value_coef": 2.0,
    "entropy_coef": 0.2,
    "max_grad_norm": 0.05,
    "normalize_advantages": False,
    "target_kl": 1e-4,
    "normalize_reward": True,
}
REFUSED_BY_NUMPY = {"value_clip": (0.2, "does not clip values: set algo.value_clip=0"),
                    "normalize_obs": (True, "does not standardise observations: set algo.normalize_obs=false"),
                    "memory": ("'lstm'", "has no recurrent policy")}
BASE = {"lr": 0.01}
"""Both sides of each comparison start from this: a step big enough that the policy ratio leaves the
clip range, so the clip settings change the result."""
# read before the update (the strategy's GAE and overlap, the network's shape, threads) or choosing the backend
# (ortho_init and log_std_init: the initial weights; normalize_clip: read only where normalisation is on;
# memory_size, memory_critic and sequence_length: read only with a memory, which the numpy backend refuses)
NOT_THE_UPDATE = {"rollout_steps", "gamma", "gae_lambda", "network", "hidden_sizes", "activation", "cnn_features",
                  "backend", "torch_threads", "overlap_update", "ortho_init", "log_std_init", "normalize_clip",
                  "memory_size", "memory_critic", "sequence_length"}


def test_every_config_field_is_classified():
    classified = set(UPDATE_FIELDS) | set(REFUSED_BY_NUMPY) | NOT_THE_UPDATE
    assert set(PPOConfig.model_fields) == classified, (
        "classify the new PPOConfig field here: does the update read it (then both backends must honour it)?")
    for name, value in {**UPDATE_FIELDS, **{k: v for k, (v, _) in REFUSED_BY_NUMPY.items()}}.items():
        assert PPOConfig.model_fields[name].default != value, name


def _after_two_updates(backend: str, **config) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Two updates from the same rollouts whatever the backend (the backends' acting draws its samples
    differently, so the rollouts come from a torch agent of the same seed)."""
    config = {**BASE, **config}
    agent, learner = make_pair(single_spec(), seed=4, steps=1_000, backend=backend, **config)
    actor, _ = make_pair(single_spec(), seed=4, steps=1_000, **config)
    assert bool(learner.numpy_updates) == (backend == "numpy")
    metrics = {}
    for seed in range(2):
        rollout = fake_rollout(actor, steps=32, seed=seed)
        metrics = learner.learn(rollout)
        actor.load_state_dict(agent.state_dict())
    return weights(agent)[rlf.SINGLE_AGENT], metrics


def _assert_same(ours: dict[str, np.ndarray], theirs: dict[str, np.ndarray]) -> None:
    for key, value in theirs.items():
        np.testing.assert_allclose(ours[key], value, rtol=2e-4, atol=2e-6, err_msg=key)


def _differs(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return any(not np.allclose(a[key], b[key], rtol=1e-5, atol=1e-7) for key in a)


@pytest.mark.parametrize("field", sorted(UPDATE_FIELDS))
def test_both_backends_honour_the_field(field):
    value = UPDATE_FIELDS[field]
    default_torch, _ = _after_two_updates("torch")
    torch_weights, torch_metrics = _after_two_updates("torch", **{field: value})
    numpy_weights, numpy_metrics = _after_two_updates("numpy", **{field: value})
    assert _differs(torch_weights, default_torch), f"{field}={value!r} should change the update"
    _assert_same(numpy_weights, torch_weights)
    for name, expected in torch_metrics.items():
        assert numpy_metrics[name] == pytest.approx(expected, rel=1e-3, abs=1e-5), name


@pytest.mark.parametrize("field", sorted(REFUSED_BY_NUMPY))
def test_the_numpy_backend_refuses_what_it_does_not_compute(field):
    value, phrase = REFUSED_BY_NUMPY[field]
    with pytest.raises(ConfigError, match=f"algo.backend='numpy' {phrase}"):
        rlf.make("ppo", "gym:CartPole-v1", overrides=["algo.backend='numpy'", f"algo.{field}={str(value).lower()}"])


def test_the_numpy_backend_refuses_a_cnn_with_one_line():
    from gymnasium import spaces
    from ppo_helpers import make_context
    from rlf_plugin_ppo import PPOAgent, PPOLearner

    spec = single_spec(spaces.Box(0, 255, (4, 42, 42), np.uint8))
    context = make_context(spec, backend="numpy")
    agent = PPOAgent(spec, context.config, 0)
    with pytest.raises(ConfigError, match=r"runs only an MLP on the CPU, and agent 'agent' has CNNActorCritic on cpu; "
                                          r"set algo.backend='torch'"):
        PPOLearner(agent, context.config, context)


def test_the_default_is_the_readable_torch_loss():
    assert PPOConfig().backend == "torch"
    _, learner = make_pair(single_spec())
    assert learner.numpy_updates == {}

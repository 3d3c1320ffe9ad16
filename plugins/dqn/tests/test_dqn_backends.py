"""DQN's default backend calls its networks as nn.Modules; ``algo.backend="fast"`` acts through numpy
(``rlf.nn.NumpyMLP``) and learns through ``model.direct_forward``: the same ops, the same results.
Every config field is classified here, and each one that shapes learning must leave both backends with
the same weights; a field added to DQNConfig without being classified fails the first test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rlf_plugin_dqn.config import DQNConfig
from test_dqn import build, transitions, vector_spec

# field -> a value other than the default that learning must honour the same way on both backends
LEARNING_FIELDS = {
    "lr": 0.05,
    "adam_eps": 1e-3,
    "gamma": 0.5,
    "reward_scale": 3.0,
    "batch_size": 16,
    "buffer_size": 40,
    "min_replay_size": 20,
    "target_update_interval": 3,
    "train_frequency": 2,
    "gradient_steps": 2,
    "double_dqn": False,
    "hidden_sizes": [16],
    "max_grad_norm": 0.01,
}
# not read by the learner's update from transitions (exploration, actors, network choice for
# other observations, threads) or choosing the backend; dueling and the CNN take the module path on
# both backends (direct_forward covers only plain MLPs: tests/test_dqn.py checks that)
NOT_THE_UPDATE = {"exploration", "actors", "actor_sync_interval", "actor_lockstep", "dueling", "network",
                  "cnn_hidden", "backend", "torch_threads", "frame_replay"}
BASE = {"hidden_sizes": [32, 32], "buffer_size": 200, "batch_size": 8, "min_replay_size": 8, "lr": 0.01,
        "target_update_interval": 10}


def test_every_config_field_is_classified():
    assert set(DQNConfig.model_fields) == set(LEARNING_FIELDS) | NOT_THE_UPDATE, (
        "classify the new DQNConfig field here: does learning read it (then both backends must honour it)?")
    for name, value in LEARNING_FIELDS.items():
        assert BASE.get(name, DQNConfig.model_fields[name].default) != value, name


def _trained(backend: str, **config):
    spec = vector_spec(num_envs=2)
    agent, learner = build(spec, seed=1, backend=backend, **{**BASE, **config})
    rng = np.random.default_rng(0)
    for _ in range(40):
        learner.learn(transitions(spec, rng.normal(size=(2, 3)), rng.integers(0, 2, 2), rng.normal(size=2),
                                  rng.normal(size=(2, 3)), rng.random(2) < 0.1))
    return agent, {key: value.clone() for key, value in agent.networks["agent"].state_dict().items()}


@pytest.mark.parametrize("field", sorted(LEARNING_FIELDS))
def test_both_backends_learn_the_same_weights(field):
    _, default = _trained("torch")
    _, reference = _trained("torch", **{field: LEARNING_FIELDS[field]})
    fast_agent, fast = _trained("fast", **{field: LEARNING_FIELDS[field]})
    if reference.keys() == default.keys():
        assert any(not torch.equal(reference[k], default[k]) for k in reference), f"{field} should change learning"
    for key, value in reference.items():
        torch.testing.assert_close(fast[key], value, rtol=1e-5, atol=1e-6, msg=key)


def test_the_fast_backend_acts_greedily_as_the_module_does():
    torch_agent, _ = _trained("torch")
    fast_agent, _ = _trained("fast")
    assert torch_agent.numpy_q == {} and "agent" in fast_agent.numpy_q
    obs = np.random.default_rng(5).normal(size=(256, 3)).astype(np.float32)
    assert (fast_agent.greedy("agent", obs) == torch_agent.greedy("agent", obs)).mean() > 0.99


def test_the_default_is_the_module_forward():
    assert DQNConfig().backend == "torch"
    _, learner = build(vector_spec())
    online, target = learner._forward["agent"]
    assert online is learner.agent.networks["agent"] and target is learner.targets["agent"]

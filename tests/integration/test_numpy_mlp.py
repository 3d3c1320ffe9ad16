"""rlf.nn.NumpyMLP: the numpy acting path computes the torch network's function and follows its weights."""

import numpy as np
import pytest
import torch
from torch import nn

from rlf.nn import NumpyMLP, mlp


@pytest.mark.parametrize("activation", [nn.Tanh, nn.ReLU])
def test_matches_the_torch_forward(activation):
    torch.manual_seed(0)
    network = mlp(5, [16, 8], 3, activation=activation)
    x = np.random.default_rng(0).normal(size=(7, 5)).astype(np.float32)
    with torch.no_grad():
        expected = network(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(NumpyMLP(network)(x), expected, rtol=1e-5, atol=1e-6)


def test_follows_optimizer_steps_and_loaded_weights_without_a_refresh():
    torch.manual_seed(0)
    network = mlp(4, [8], 2, activation=nn.Tanh)
    fast = NumpyMLP(network)
    x = np.ones((2, 4), dtype=np.float32)
    before = fast(x).copy()
    optimizer = torch.optim.Adam(network.parameters(), lr=0.1, fused=True)
    network(torch.from_numpy(x)).sum().backward()
    optimizer.step()
    with torch.no_grad():
        expected = network(torch.from_numpy(x)).numpy()
    assert not np.allclose(before, expected)
    np.testing.assert_allclose(fast(x), expected, rtol=1e-5, atol=1e-6)
    other = mlp(4, [8], 2, activation=nn.Tanh)
    network.load_state_dict(other.state_dict())
    with torch.no_grad():
        np.testing.assert_allclose(fast(x), other(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_supports_only_linear_and_activation_stacks_on_the_cpu():
    assert NumpyMLP.supports(mlp(4, [8], 2))
    assert not NumpyMLP.supports([nn.Linear(4, 4), nn.LayerNorm(4)])
    assert not NumpyMLP.supports([])

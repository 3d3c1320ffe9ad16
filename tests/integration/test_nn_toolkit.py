"""rlf.nn, the network toolkit every torch plugin builds on: the one image rule (PPO and DQN agree),
the observation encoder, the MLP and Nature CNN builders and the thread policy. Lives with the
integration tests because it needs torch, which the core's own env does not have."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from rlf_plugin_dqn.model import observation_layout
from rlf_plugin_ppo import PPOConfig
from rlf_plugin_ppo.model import CNNActorCritic, build_network

from rlf import ConfigError, IncompatibleError
from rlf.nn import (
    DEFAULT_TORCH_THREADS,
    MultiInputEncoder,
    ObservationEncoder,
    TorchThreads,
    as_tensors,
    image_layout,
    init_orthogonal,
    mlp,
    nature_cnn,
    set_threads,
)

SPACES = {
    "uint8 chw stack": (spaces.Box(0, 255, (4, 84, 84), np.uint8), "chw"),
    "uint8 hwc rgb": (spaces.Box(0, 255, (84, 84, 3), np.uint8), "hwc"),
    "float chw": (spaces.Box(0, 1, (4, 84, 84), np.float32), "chw"),
    "smallest sides": (spaces.Box(0, 255, (1, 36, 36), np.uint8), "chw"),
    "too small": (spaces.Box(0, 255, (4, 35, 84), np.uint8), None),
    "too many channels": (spaces.Box(0, 255, (20, 50, 50), np.uint8), None),
    "vector": (spaces.Box(-1, 1, (8,), np.float32), None),
    "matrix": (spaces.Box(-1, 1, (40, 40), np.float32), None),
    "ids": (spaces.Discrete(5), None),
}


@pytest.mark.parametrize("name", SPACES)
def test_one_image_rule_and_ppo_and_dqn_follow_it(name):
    space, expected = SPACES[name]
    assert image_layout(space) == expected
    ppo = build_network("agent", space, spaces.Discrete(3), PPOConfig(hidden_sizes=[8]))
    assert isinstance(ppo, CNNActorCritic) == (expected is not None)
    assert observation_layout(space, "auto").image == (expected is not None)


def test_discrete_ids_are_one_hot_from_their_start():
    encoder = ObservationEncoder(spaces.Discrete(4, start=2))
    assert encoder.shape == (4,) and not encoder.image
    out = encoder(torch.tensor([2, 5, 3], dtype=torch.int64))
    assert out.dtype == torch.float32
    np.testing.assert_array_equal(out.numpy(), np.eye(4)[[0, 3, 1]])


def test_images_come_out_channels_first_and_pixels_scaled():
    hwc = ObservationEncoder(spaces.Box(0, 255, (40, 50, 3), np.uint8))
    assert hwc.image and hwc.shape == (3, 40, 50)
    pixels = torch.randint(0, 256, (2, 40, 50, 3), dtype=torch.uint8)
    torch.testing.assert_close(hwc(pixels), pixels.permute(0, 3, 1, 2).float() / 255)
    floats = ObservationEncoder(spaces.Box(0, 2, (4, 40, 40), np.float32))
    x = torch.rand(2, 4, 40, 40) * 2
    torch.testing.assert_close(floats(x), x)  # not pixels: left as they are


def test_vectors_are_flattened_and_bounds_mapped_onto_the_unit_interval():
    box = spaces.Box(np.array([[-9.0, 0.0]], np.float32), np.array([[9.0, np.inf]], np.float32), dtype=np.float32)
    assert ObservationEncoder(box).shape == (2,)
    encoder = ObservationEncoder(box, bounds=True)
    out = encoder(torch.tensor([[[9.0, 5.0]], [[-9.0, -3.0]]]))
    torch.testing.assert_close(out, torch.tensor([[1.0, 5.0], [-1.0, -3.0]]))  # unbounded dims untouched
    assert encoder.state_dict() == {}  # derived from the space: nothing to checkpoint
    # an image read as a vector with network="mlp": flattened, still / 255
    flat = ObservationEncoder(spaces.Box(0, 255, (1, 36, 36), np.uint8), "mlp")
    assert not flat.image and flat.shape == (36 * 36,)
    assert float(flat(torch.full((1, 1, 36, 36), 255, dtype=torch.uint8)).max()) == pytest.approx(1.0)


def test_one_line_errors_for_cnn_on_vectors_and_unreadable_spaces():
    with pytest.raises(ConfigError, match="algo.network='cnn' needs image observations") as error:
        ObservationEncoder(spaces.Box(-1, 1, (8,), np.float32), "cnn")
    assert "\n" not in str(error.value)
    with pytest.raises(IncompatibleError, match="Box or Discrete"):
        ObservationEncoder(spaces.MultiBinary(3))
    with pytest.raises(IncompatibleError, match="nested Dict") as error:
        ObservationEncoder(spaces.Dict({"outer": spaces.Dict({"inner": spaces.Discrete(2)})}))
    assert "\n" not in str(error.value)
    with pytest.raises(ConfigError, match="algo.network='cnn' needs an image part"):
        ObservationEncoder(spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1, (3,)))), "cnn")


def test_dict_and_tuple_parts_are_encoded_side_by_side_with_a_cnn_per_image():
    space = spaces.Dict({"ids": spaces.Discrete(3, start=1), "pixels": spaces.Box(0, 255, (40, 40, 3), np.uint8),
                         "small": spaces.Box(0, 255, (8, 8, 1), np.uint8), "vector": spaces.Box(-1, 1, (2,))})
    encoder = ObservationEncoder(space, cnn_features=16)
    assert isinstance(encoder, MultiInputEncoder) and not encoder.image
    assert encoder.features == encoder.shape[0] == 3 + 16 + 64 + 2  # small images are flattened, as alone
    assert sorted(encoder.cnns) == ["1"] and all(k.startswith("cnns.1.") for k in encoder.state_dict())
    batch = {"ids": np.array([1, 3]), "pixels": np.zeros((2, 40, 40, 3), np.uint8),
             "small": np.full((2, 8, 8, 1), 255, np.uint8), "vector": np.array([[0.5, -1.0], [1.0, 0.0]], np.float32)}
    out = encoder(as_tensors(batch))
    assert tuple(out.shape) == (2, 85)
    assert out[:, :3].tolist() == [[1, 0, 0], [0, 0, 1]]  # one-hot from the space's start
    assert (out[:, 19:83] == 1.0).all()  # uint8 scaled by 1/255
    assert out[:, 83:].tolist() == [[0.5, -1.0], [1.0, 0.0]]
    flat = ObservationEncoder(space, "mlp")
    assert flat.features == 3 + 40 * 40 * 3 + 64 + 2 and not list(flat.state_dict())
    pair = ObservationEncoder(spaces.Tuple((spaces.Discrete(2), spaces.Box(-1, 1, (3,)))))
    assert pair(as_tensors((np.array([1]), np.zeros((1, 3), np.float32)))).tolist() == [[0, 1, 0, 0, 0]]
    import copy

    assert copy.deepcopy(encoder).features == encoder.features  # deepcopy (target networks) works


def test_mlp_widths_activations_and_orthogonal_init():
    net = mlp(5, [16, 8], 3, activation=torch.nn.Tanh, gain=math.sqrt(2), out_gain=0.01)
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(5, 16), (16, 8), (8, 3)]
    assert sum(isinstance(m, torch.nn.Tanh) for m in net) == 2 and isinstance(net[-1], torch.nn.Linear)
    w = linears[1].weight  # 8 x 16: orthonormal rows scaled by the gain
    torch.testing.assert_close(w @ w.T, 2 * torch.eye(8), atol=1e-5, rtol=1e-5)
    assert float(linears[2].weight.detach().norm(dim=1).max()) == pytest.approx(0.01, rel=1e-4)
    assert all(float(m.bias.abs().max()) == 0 for m in linears)
    torso = mlp(5, [16])
    assert isinstance(torso[-1], torch.nn.ReLU) and torso(torch.zeros(2, 5)).shape == (2, 16)


def test_nature_cnn_shapes_and_the_same_weights_for_the_same_seed():
    torch.manual_seed(0)
    cnn = nature_cnn((4, 84, 84), 512)
    assert cnn(torch.zeros(3, 4, 84, 84)).shape == (3, 512)
    assert [m.out_channels for m in cnn.modules() if isinstance(m, torch.nn.Conv2d)] == [32, 64, 64]
    torch.manual_seed(0)
    again = nature_cnn((4, 84, 84), 512)
    for a, b in zip(cnn.parameters(), again.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    trunk = nature_cnn((1, 36, 36), None)
    assert trunk(torch.zeros(1, 1, 36, 36)).shape == (1, 64)  # 36x36 leaves 1x1
    with pytest.raises(ConfigError, match="at least 36x36"):
        nature_cnn((1, 30, 30))
    layer = init_orthogonal(torch.nn.Linear(4, 4), 1.0)
    torch.testing.assert_close(layer.weight @ layer.weight.T, torch.eye(4), atol=1e-5, rtol=1e-5)


def test_thread_policy_and_the_one_setter():
    threads = torch.get_num_threads()
    try:
        assert vars(TorchThreads.plan(3, "cpu")) == {"acting": 3, "learning": 3}
        assert vars(TorchThreads.plan(0, "cpu")) == {"acting": 1, "learning": 1}
        assert vars(TorchThreads.plan(0, "cpu", images=True)) == {"acting": 1, "learning": DEFAULT_TORCH_THREADS}
        assert vars(TorchThreads.plan(2, "cuda")) == {"acting": None, "learning": None}
        set_threads(2)
        assert torch.get_num_threads() == 2
        set_threads(0)  # 0 / None: leave it
        assert torch.get_num_threads() == 2
        TorchThreads(1, 2).for_acting()
        assert torch.get_num_threads() == 1
    finally:
        set_threads(threads)

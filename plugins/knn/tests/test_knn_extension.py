"""The kNN extension on hand-made rollouts: NGU's kernel and pseudo-count, per-env episodic memories
that reset at episode ends and persist across rollouts, and both embeddings."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from knn_support import make_context, make_rollout, whole_batch
from rlf_plugin_knn.config import KNNConfig
from rlf_plugin_knn.learner import KNNExtension
from rlf_plugin_knn.model import EpisodicMemory

from rlf import SINGLE_AGENT
from rlf.storage import checkpoint

LENGTH = 40
EYE = np.eye(LENGTH, dtype=np.float32)


def corridor_extension(seed=0, num_envs=1, **fields) -> KNNExtension:
    config = KNNConfig(**fields)
    return KNNExtension(make_context(config, spaces.Box(0.0, 1.0, (LENGTH,), np.float32), 4, num_envs, seed=seed))


def path_rollout(path: np.ndarray, dones: np.ndarray | None = None):
    """Cells visited (T + 1, N): obs[t] = path[t], next_obs[t] = path[t + 1]."""
    path = np.asarray(path).reshape(len(path), -1)
    return make_rollout(EYE[path[:-1]], EYE[path[1:]], np.ones(path[1:].shape, dtype=np.int64), dones)


def rewards(extension, rollout) -> np.ndarray:
    return extension.intrinsic_rewards(rollout)[SINGLE_AGENT][:, 0] / extension.config.intrinsic_coef


def test_novelty_follows_ngus_kernel_and_pseudo_count():
    memory = EpisodicMemory(1, 10, 2, torch.device("cpu"), neighbours=2, kernel_epsilon=0.1, cluster_distance=0.05,
                            pseudo_count_constant=0.01, max_similarity=8.0, distance_momentum=0.5)
    everyone = torch.ones(1, dtype=torch.bool)
    for point in ([0.0, 0.0], [1.0, 0.0], [3.0, 0.0]):
        memory.add(torch.tensor([point]), everyone)
    reward = memory.novelty(torch.tensor([[0.0, 1.0]]), everyone).item()
    nearest = np.array([1.0, 2.0])  # squared distances to (0, 0) and (1, 0)
    normalised = np.maximum(nearest / nearest.mean() - 0.05, 0.0)  # first batch sets the running mean
    kernel = 0.1 / (normalised + 0.1)
    assert reward == pytest.approx(1.0 / (np.sqrt(kernel.sum()) + 0.01), rel=1e-5)
    assert memory.mean_distance == pytest.approx(1.5)
    memory.novelty(torch.tensor([[3.0, 0.0]]), everyone)  # squared distances 0 and 4: batch mean 2
    assert memory.mean_distance == pytest.approx(0.5 * 1.5 + 0.5 * 2.0)


def test_no_reward_beyond_the_maximum_similarity():
    memory = EpisodicMemory(1, 100, 2, torch.device("cpu"), neighbours=10, kernel_epsilon=1e-3,
                            cluster_distance=8e-3, pseudo_count_constant=1e-3, max_similarity=2.0,
                            distance_momentum=0.99)
    everyone = torch.ones(1, dtype=torch.bool)
    for _ in range(10):
        memory.add(torch.tensor([[1.0, 1.0]]), everyone)
    memory.add(torch.tensor([[5.0, 5.0]]), everyone)  # the running mean needs a non-zero distance
    # ten identical neighbours: sqrt(10 * 1) + c > 2 -> no reward at all
    assert memory.novelty(torch.tensor([[1.0, 1.0]]), everyone).item() == 0.0


def test_revisiting_a_state_within_an_episode_earns_less_than_the_first_visit():
    extension = corridor_extension()
    path = [0, 1, 2, 3, 4, 5, 6, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 9, 10, 11]
    reward = rewards(extension, path_rollout(path))
    first_visits, revisits = reward[:7], reward[7:17]
    assert (first_visits > 0).all()
    assert revisits.max() < 0.5 * first_visits.min()
    assert reward[17:].min() > 2 * revisits.max()  # cells 9, 10, 11 are new again


def test_memory_resets_at_episode_ends_and_is_per_env():
    extension = corridor_extension(num_envs=2)
    path = np.array([[0, 1, 2, 3, 0, 1, 2, 3], [0, 1, 2, 3, 0, 1, 2, 3]]).T
    dones = np.zeros((7, 2), dtype=bool)
    dones[3, 1] = True  # env 1's episode ends on reaching cell 0 again... env 0's goes on
    scaled = extension.intrinsic_rewards(path_rollout(path, dones))[SINGLE_AGENT]
    # env 1 starts over at the step after its episode end: cells 1, 2, 3 are new in the new episode
    assert (scaled[4:, 1] > 2 * scaled[4:, 0]).all()
    np.testing.assert_allclose(scaled[:3, 0], scaled[:3, 1])


def test_memories_persist_across_rollouts_for_episodes_still_running():
    path = np.array([0, 1, 2, 3, 4, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 9, 10])
    dones = np.zeros(len(path) - 1, dtype=bool)
    dones[12] = True
    whole = rewards(corridor_extension(), path_rollout(path, dones.reshape(-1, 1)))
    split = corridor_extension()
    first = rewards(split, path_rollout(path[:7], dones[:6].reshape(-1, 1)))
    second = rewards(split, path_rollout(path[6:], dones[6:].reshape(-1, 1)))
    np.testing.assert_allclose(np.concatenate([first, second]), whole, rtol=1e-6)
    assert (second[:4] < 0.5 * first[:5].min()).all()  # the way back is remembered from the first rollout


def test_random_projection_is_fixed_and_roughly_keeps_distances():
    extension = corridor_extension(embedding="random", embedding_dim=256)
    assert list(extension.parameters()) == []
    batch = whole_batch(path_rollout(np.arange(12)))
    assert extension.loss(batch) == (None, {})
    embedded = extension.embedding(SINGLE_AGENT)(torch.as_tensor(EYE[:12]))
    squared = torch.cdist(embedded, embedded).pow(2)
    off_diagonal = squared[~torch.eye(12, dtype=torch.bool)]
    assert off_diagonal.mean().item() == pytest.approx(2.0, rel=0.15)  # one-hot cells are sqrt(2) apart


def test_inverse_dynamics_embedding_learns_to_tell_actions_apart():
    extension = corridor_extension(embedding="inverse_dynamics")
    rng = np.random.default_rng(0)
    cells = rng.integers(1, 30, 512)
    actions = rng.integers(0, 3, 512)  # 0: back, 1: forward, 2: stay
    next_cells = np.where(actions == 0, cells - 1, np.where(actions == 1, cells + 1, cells))
    rollout = make_rollout(EYE[cells].reshape(512, 1, LENGTH), EYE[next_cells].reshape(512, 1, LENGTH),
                           actions.reshape(512, 1))
    extension.intrinsic_rewards(rollout)
    batch = whole_batch(rollout)
    optimizer = torch.optim.Adam(extension.parameters(), lr=3e-3)
    first = extension.loss(batch)[1]["inverse_loss"]
    for _ in range(150):
        loss, stats = extension.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert first > 1.0 and stats["inverse_loss"] < 0.2


def test_image_stacks_use_the_conv_encoder():
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    extension = KNNExtension(make_context(KNNConfig(), space, 7, 2))
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (3, 2, 4, 84, 84), dtype=np.uint8)
    rollout = make_rollout(obs, rng.integers(0, 256, (3, 2, 4, 84, 84), dtype=np.uint8), rng.integers(0, 7, (3, 2)))
    reward = extension.intrinsic_rewards(rollout)[SINGLE_AGENT]
    assert reward.shape == (3, 2) and np.isfinite(reward).all() and (reward > 0).all()
    loss, _ = extension.loss(whole_batch(rollout))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in extension.parameters())


def test_metrics_log_intrinsic_and_extrinsic_rewards_separately():
    extension = corridor_extension(num_envs=1, intrinsic_coef=0.5)
    rollout = path_rollout([0, 1, 2, 3, 4])
    rollout.rewards[SINGLE_AGENT][:] = 3.0
    scaled = extension.intrinsic_rewards(rollout)[SINGLE_AGENT]
    metrics = extension.metrics()
    assert metrics["extrinsic_reward_mean"] == pytest.approx(3.0)
    assert metrics["intrinsic_reward_mean"] == pytest.approx(float(scaled.mean()), rel=1e-5)
    assert metrics["episodic_reward_mean"] == pytest.approx(float(scaled.mean()) / 0.5, rel=1e-5)
    assert metrics["memory_fill"] == 5


def test_state_dict_round_trip_keeps_the_embedding_and_starts_fresh_episodes(tmp_path):
    trained = corridor_extension(seed=0)
    rewards(trained, path_rollout([0, 1, 2, 3, 4, 5]))
    checkpoint.save(tmp_path / "knn.rlf", {"extension": trained.state_dict()})
    fresh = corridor_extension(seed=1)
    fresh.load_state_dict(checkpoint.load(tmp_path / "knn.rlf")["extension"])
    assert fresh.memories[SINGLE_AGENT].mean_distance == trained.memories[SINGLE_AGENT].mean_distance
    for name, tensor in trained.embeddings.state_dict().items():
        assert torch.equal(fresh.embeddings.state_dict()[name], tensor)
    # a resumed run starts new episodes, so the memories start empty
    trained.memories[SINGLE_AGENT].reset()
    rollout = path_rollout([0, 1, 2, 3, 2, 1])
    np.testing.assert_array_equal(rewards(fresh, rollout), rewards(trained, rollout))


def test_a_full_memory_overwrites_its_oldest_embeddings():
    memory = EpisodicMemory(1, 3, 1, torch.device("cpu"), neighbours=1, kernel_epsilon=1e-3, cluster_distance=0.0,
                            pseudo_count_constant=1e-3, max_similarity=8.0, distance_momentum=0.0)
    everyone = torch.ones(1, dtype=torch.bool)
    for value in (0.0, 10.0, 20.0, 30.0, 40.0):
        memory.add(torch.tensor([[value]]), everyone)
    assert memory.filled.tolist() == [3]
    kept = memory.novelty(torch.tensor([[30.0]]), everyone).item()
    forgotten = memory.novelty(torch.tensor([[0.0]]), everyone).item()
    assert forgotten > 10 * kept

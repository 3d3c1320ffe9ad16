"""The RND extension on hand-made rollouts: novelty from distillation error, observation and reward
normalisation, the non-episodic intrinsic stream with its own discount, the combined advantage."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from rlf_plugin_rnd.config import RNDConfig
from rlf_plugin_rnd.learner import RNDExtension
from rnd_support import corridor_rollout, make_context, make_rollout, whole_batch

from rlf import SINGLE_AGENT, compute_gae
from rlf.storage import checkpoint

LENGTH = 40


def corridor_extension(seed=0, num_envs=8, **fields) -> RNDExtension:
    config = RNDConfig(**fields)
    return RNDExtension(make_context(config, spaces.Box(0.0, 1.0, (LENGTH,), np.float32), 4, num_envs, seed=seed))


def raw_novelty(extension: RNDExtension, rollout) -> np.ndarray:
    """Distillation error under the current statistics, without updating them."""
    return extension.raw_rewards(SINGLE_AGENT, rollout.next_obs[SINGLE_AGENT].reshape(-1, LENGTH), False)


def train(extension: RNDExtension, rollout, updates: int) -> None:
    optimizer = torch.optim.Adam(extension.parameters(), lr=1e-3)
    batch = whole_batch(rollout)
    for _ in range(updates):
        loss, _ = extension.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_reward_is_positive_on_new_states_and_falls_once_they_are_familiar():
    extension = corridor_extension(predictor_update_proportion=1.0)
    rng = np.random.default_rng(0)
    familiar = corridor_rollout(rng.integers(0, 10, (32, 8)), LENGTH)
    novel = corridor_rollout(rng.integers(20, 38, (32, 8)), LENGTH)
    extension.extra_advantages(familiar)
    before = raw_novelty(extension, familiar)
    assert (before > 0).all()
    train(extension, familiar, 200)
    after, unseen = raw_novelty(extension, familiar), raw_novelty(extension, novel)
    assert after.mean() < 0.1 * before.mean()
    assert unseen.mean() > 10 * after.mean()


def test_observations_are_normalised_by_running_statistics_and_clipped():
    extension = corridor_extension(obs_clip=3.0)
    cells = np.random.default_rng(0).integers(0, 5, (16, 8))
    cells[3, 3] = 10  # one rare cell: far out in normalised units
    rollout = corridor_rollout(cells, LENGTH)
    extension.extra_advantages(rollout)
    next_obs = rollout.next_obs[SINGLE_AGENT].reshape(-1, LENGTH)
    stats = extension.obs_stats[SINGLE_AGENT]
    np.testing.assert_allclose(stats.mean, next_obs.mean(axis=0), atol=1e-4)
    np.testing.assert_allclose(stats.var, next_obs.var(axis=0), atol=1e-4)
    normalised = extension.normalise(SINGLE_AGENT, torch.as_tensor(next_obs)).numpy()
    frequent = normalised[next_obs[:, 2] == 1, 2]  # about 1 in 5: (1 - p) / sqrt(p (1 - p)) = 2
    assert np.all(np.abs(frequent - 2.0) < 0.3)
    assert normalised[next_obs[:, 11] == 1, 11] == pytest.approx(3.0)  # 1 in 128 would be 11.3: clipped


def test_rewards_are_divided_by_the_running_std_of_the_discounted_intrinsic_return():
    extension = corridor_extension(int_gamma=0.9)
    rollout = corridor_rollout(np.random.default_rng(0).integers(0, 20, (16, 8)), LENGTH)
    extension.extra_advantages(rollout)
    raw = raw_novelty(extension, rollout).reshape(16, 8)
    returns, running = [], np.zeros(8)
    for t in range(16):
        running = 0.9 * running + raw[t]
        returns.append(running.copy())
    std = np.std(np.concatenate(returns))
    metrics = extension.metrics()
    assert metrics["intrinsic_return_std"] == pytest.approx(std, rel=1e-3)
    assert metrics["intrinsic_reward_mean"] == pytest.approx(raw.mean() / std, rel=1e-3)
    assert metrics["intrinsic_reward_raw_mean"] == pytest.approx(raw.mean(), rel=1e-3)


def test_intrinsic_advantages_ignore_episode_ends_and_use_their_own_discount():
    cells = np.random.default_rng(0).integers(0, 20, (16, 4))
    dones = np.zeros((16, 4), dtype=bool)
    dones[5, :] = dones[11, 2] = True
    with_ends, without = corridor_rollout(cells, LENGTH), corridor_rollout(cells, LENGTH)
    with_ends.dones[SINGLE_AGENT][:] = with_ends.terminated[SINGLE_AGENT][:] = dones
    advantages = [corridor_extension(num_envs=4, ext_coef=1.0).extra_advantages(r)[SINGLE_AGENT]
                  for r in (with_ends, without)]
    np.testing.assert_array_equal(advantages[0], advantages[1])
    other_gamma = corridor_extension(num_envs=4, ext_coef=1.0, gamma=0.5).extra_advantages(without)[SINGLE_AGENT]
    np.testing.assert_array_equal(other_gamma, advantages[1])  # PPO's gamma is the extrinsic one only
    other_int_gamma = corridor_extension(num_envs=4, ext_coef=1.0, int_gamma=0.5).extra_advantages(without)
    assert not np.allclose(other_int_gamma[SINGLE_AGENT], advantages[1])


def test_intrinsic_advantage_is_gae_over_the_intrinsic_value_head():
    extension = corridor_extension(num_envs=4, ext_coef=1.0, int_coef=1.0, int_gamma=0.95, gae_lambda=0.9)
    rollout = corridor_rollout(np.random.default_rng(0).integers(0, 20, (8, 4)), LENGTH)
    extra = extension.extra_advantages(rollout)[SINGLE_AGENT]
    std = extension.metrics()["intrinsic_return_std"]
    rewards = (raw_novelty(extension, rollout).reshape(8, 4) / std).astype(np.float32)
    net = extension.net(SINGLE_AGENT)
    with torch.no_grad():
        values = net.value(torch.as_tensor(rollout.obs[SINGLE_AGENT].reshape(-1, LENGTH))).numpy().reshape(8, 4)
        last = net.value(torch.as_tensor(rollout.next_obs[SINGLE_AGENT][-1])).numpy()
    next_values = np.concatenate([values[1:], last[None]])
    never = np.zeros((8, 4), dtype=bool)
    expected, returns = compute_gae(rewards, values, next_values, never, never, 0.95, 0.9)
    np.testing.assert_allclose(extra, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(extension._returns[SINGLE_AGENT].numpy(), returns.reshape(-1), rtol=1e-4, atol=1e-6)


def test_combined_advantage_weights_extrinsic_and_intrinsic_parts():
    cells = np.random.default_rng(0).integers(0, 20, (8, 4))
    extrinsic = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)

    def extra(**fields):
        rollout = corridor_rollout(cells, LENGTH)
        rollout.advantages[SINGLE_AGENT][:] = extrinsic
        return corridor_extension(num_envs=4, **fields).extra_advantages(rollout)[SINGLE_AGENT]

    # PPO adds the returned array to its extrinsic advantage, so the sum is ext_coef*A_ext + int_coef*A_int.
    np.testing.assert_allclose(extrinsic + extra(ext_coef=3.0, int_coef=0.0), 3.0 * extrinsic, rtol=1e-5)
    intrinsic = extra(ext_coef=1.0, int_coef=1.0)
    np.testing.assert_allclose(extrinsic + extra(ext_coef=2.0, int_coef=0.5), 2.0 * extrinsic + 0.5 * intrinsic,
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("proportion", [0.25, 1.0])
def test_predictor_trains_on_the_configured_share_of_each_minibatch(proportion):
    extension = corridor_extension(predictor_update_proportion=proportion)
    rollout = corridor_rollout(np.random.default_rng(0).integers(0, 20, (256, 8)), LENGTH)
    extension.extra_advantages(rollout)
    _, stats = extension.loss(whole_batch(rollout))
    assert stats["predictor_share"] == pytest.approx(proportion, abs=0.03)


def test_image_stacks_feed_the_latest_frames_to_target_and_predictor():
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    extension = RNDExtension(make_context(RNDConfig(image_frames=1), space, 7, 2))
    assert extension.obs_stats[SINGLE_AGENT].mean.shape == (1, 84, 84)
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (3, 2, 4, 84, 84), dtype=np.uint8)
    rollout = make_rollout(obs, obs.copy(), rng.integers(0, 7, (3, 2)))
    rollout.next_obs[SINGLE_AGENT][..., :3, :, :] = 0  # only the last frame matters
    extra = extension.extra_advantages(rollout)[SINGLE_AGENT]
    assert extra.shape == (3, 2) and np.isfinite(extra).all()
    np.testing.assert_allclose(extension.obs_stats[SINGLE_AGENT].mean[0],
                               obs[:, :, -1].reshape(6, 84, 84).mean(axis=0) / 255.0, rtol=1e-4)
    loss, _ = extension.loss(whole_batch(rollout))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in extension.parameters())


def test_metrics_log_intrinsic_and_extrinsic_rewards_separately():
    extension = corridor_extension(num_envs=4)
    rollout = corridor_rollout(np.arange(8).reshape(2, 4), LENGTH)
    rollout.rewards[SINGLE_AGENT][:] = 3.0
    extension.extra_advantages(rollout)
    metrics = extension.metrics()
    assert metrics["extrinsic_reward_mean"] == pytest.approx(3.0)
    assert metrics["intrinsic_reward_mean"] > 0 and metrics["intrinsic_reward_raw_mean"] > 0


def test_state_dict_round_trip_through_a_checkpoint_file(tmp_path):
    trained = corridor_extension(seed=0, predictor_update_proportion=0.5)
    rng = np.random.default_rng(1)
    first, second = (corridor_rollout(rng.integers(0, 30, (16, 8)), LENGTH) for _ in range(2))
    trained.extra_advantages(first)
    train(trained, first, 10)
    checkpoint.save(tmp_path / "rnd.rlf", {"extension": trained.state_dict()})
    fresh = corridor_extension(seed=1, predictor_update_proportion=0.5)
    fresh.load_state_dict(checkpoint.load(tmp_path / "rnd.rlf")["extension"])
    np.testing.assert_array_equal(fresh.extra_advantages(second)[SINGLE_AGENT],
                                  trained.extra_advantages(second)[SINGLE_AGENT])
    assert fresh.metrics() == trained.metrics()
    batch = whole_batch(second)  # same sampling stream: the predictor's share mask matches
    assert fresh.loss(batch)[1] == trained.loss(batch)[1]

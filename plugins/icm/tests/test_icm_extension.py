"""The ICM extension on hand-made rollouts: reward from the forward model's error, the paper's loss
weighting, image observations, and checkpoints."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from icm_support import corridor_rollout, make_context, make_rollout, whole_batch
from rlf_plugin_icm.config import ICMConfig
from rlf_plugin_icm.learner import ICMExtension

from rlf import SINGLE_AGENT
from rlf.storage import checkpoint

LENGTH = 40


def corridor_extension(seed=0, **fields) -> ICMExtension:
    config = ICMConfig(**fields)
    return ICMExtension(make_context(config, spaces.Box(0.0, 1.0, (LENGTH,), np.float32), 4, 8, seed=seed))


def train(extension: ICMExtension, rollout, updates: int) -> None:
    optimizer = torch.optim.Adam(extension.parameters(), lr=1e-3)
    batch = whole_batch(rollout)
    for _ in range(updates):
        loss, _ = extension.loss(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_reward_is_positive_on_new_states_and_falls_once_they_are_familiar():
    extension = corridor_extension()
    rng = np.random.default_rng(0)
    familiar = corridor_rollout(rng.integers(0, 10, (32, 8)), LENGTH)
    novel = corridor_rollout(rng.integers(20, 38, (32, 8)), LENGTH)
    before = extension.intrinsic_rewards(familiar)[SINGLE_AGENT]
    assert before.shape == (32, 8) and (before > 0).all()
    train(extension, familiar, 300)
    after = extension.intrinsic_rewards(familiar)[SINGLE_AGENT]
    unseen = extension.intrinsic_rewards(novel)[SINGLE_AGENT]
    assert after.mean() < 0.2 * before.mean()
    assert unseen.mean() > 5 * after.mean()


def test_reward_is_eta_over_two_times_the_squared_feature_error():
    extension = corridor_extension(eta=0.5)
    rollout = corridor_rollout(np.arange(8).reshape(2, 4), LENGTH)
    module = extension.module(SINGLE_AGENT)
    batch = whole_batch(rollout)
    with torch.no_grad():
        phi, phi_next = module.features(batch.obs), module.features(batch.next_obs)
        one_hot = torch.nn.functional.one_hot(batch.actions, 4).float()
        predicted = module.forward_model(torch.cat([phi, one_hot], dim=1))
    expected = 0.5 * 0.5 * (predicted - phi_next).pow(2).sum(dim=1).reshape(2, 4).numpy()
    np.testing.assert_allclose(extension.intrinsic_rewards(rollout)[SINGLE_AGENT], expected, rtol=1e-5)


@pytest.mark.parametrize("beta, policy_weight", [(0.2, 0.1), (0.0, 1.0), (1.0, 0.5)])
def test_loss_is_the_papers_weighting_relative_to_the_policy_loss(beta, policy_weight):
    extension = corridor_extension(beta=beta, policy_weight=policy_weight)
    batch = whole_batch(corridor_rollout(np.arange(16).reshape(4, 4), LENGTH))
    loss, stats = extension.loss(batch)
    expected = ((1 - beta) * stats["inverse_loss"] + beta * stats["forward_loss"]) / policy_weight
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert stats["inverse_loss"] > 0 and stats["forward_loss"] > 0


def test_actions_of_an_offset_discrete_space_are_shifted_to_ppos_zero_based_ids():
    observation_space = spaces.Box(0.0, 1.0, (LENGTH,), np.float32)
    plain = ICMExtension(make_context(ICMConfig(), observation_space, 4, 4))
    context = make_context(ICMConfig(), observation_space, 4, 4)
    context.env_spec.action_spaces[SINGLE_AGENT] = spaces.Discrete(4, start=10)
    offset = ICMExtension(context)
    rollout = corridor_rollout(np.arange(8).reshape(2, 4), LENGTH)
    expected = plain.intrinsic_rewards(rollout)[SINGLE_AGENT]
    rollout.actions[SINGLE_AGENT] = rollout.actions[SINGLE_AGENT] + 10
    np.testing.assert_allclose(offset.intrinsic_rewards(rollout)[SINGLE_AGENT], expected)


def test_image_stacks_use_the_conv_encoder():
    space = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    extension = ICMExtension(make_context(ICMConfig(), space, 7, 2))
    module = extension.module(SINGLE_AGENT)
    assert module.inputs.image and module.feature_dim == 32 * 6 * 6
    rng = np.random.default_rng(0)
    obs = rng.integers(0, 256, (3, 2, 4, 84, 84), dtype=np.uint8)
    next_obs = rng.integers(0, 256, (3, 2, 4, 84, 84), dtype=np.uint8)
    rollout = make_rollout(obs, next_obs, rng.integers(0, 7, (3, 2)))
    rewards = extension.intrinsic_rewards(rollout)[SINGLE_AGENT]
    assert rewards.shape == (3, 2) and np.isfinite(rewards).all() and (rewards > 0).all()
    loss, _ = extension.loss(whole_batch(rollout))
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in extension.parameters())


def test_metrics_log_intrinsic_and_extrinsic_rewards_separately():
    extension = corridor_extension(eta=1.0)
    rollout = corridor_rollout(np.arange(8).reshape(2, 4), LENGTH)
    rollout.rewards[SINGLE_AGENT][:] = 3.0
    rewards = extension.intrinsic_rewards(rollout)[SINGLE_AGENT]
    metrics = extension.metrics()
    assert metrics["extrinsic_reward_mean"] == pytest.approx(3.0)
    assert metrics["intrinsic_reward_mean"] == pytest.approx(float(rewards.mean()), rel=1e-5)
    assert metrics["intrinsic_reward_max"] == pytest.approx(float(rewards.max()), rel=1e-5)


def test_state_dict_round_trip_through_a_checkpoint_file(tmp_path):
    trained = corridor_extension(seed=0)
    rollout = corridor_rollout(np.random.default_rng(1).integers(0, 30, (16, 8)), LENGTH)
    train(trained, rollout, 20)
    checkpoint.save(tmp_path / "icm.rlf", {"extension": trained.state_dict()})
    fresh = corridor_extension(seed=1)
    assert not np.allclose(fresh.intrinsic_rewards(rollout)[SINGLE_AGENT],
                           trained.intrinsic_rewards(rollout)[SINGLE_AGENT])
    fresh.load_state_dict(checkpoint.load(tmp_path / "icm.rlf")["extension"])
    np.testing.assert_array_equal(fresh.intrinsic_rewards(rollout)[SINGLE_AGENT],
                                  trained.intrinsic_rewards(rollout)[SINGLE_AGENT])


def test_each_agent_id_gets_its_own_module_and_absent_agents_get_no_reward():
    from rlf import BuildContext, EnvSpec, Rollout, RunConfig

    spaces_by_agent = {"predator": spaces.Box(0.0, 1.0, (6,), np.float32), "prey": spaces.Box(0.0, 1.0, (3,), np.float32)}
    spec = EnvSpec("test", ("predator", "prey"), spaces_by_agent, {a: spaces.Discrete(2) for a in spaces_by_agent},
                   True, 2)
    extension = ICMExtension(BuildContext(spec, ICMConfig(), RunConfig(algorithm="icm", env="test"), 0, "cpu"))
    assert extension.module("predator") is not extension.module("prey")
    rng = np.random.default_rng(0)
    per_agent = {a: rng.random((4, 2, s.shape[0])).astype(np.float32) for a, s in spaces_by_agent.items()}
    alive = {"predator": np.ones((4, 2), dtype=bool), "prey": np.array([[1, 1], [1, 0], [0, 0], [0, 0]], dtype=bool)}
    zeros = {a: np.zeros((4, 2), dtype=np.float32) for a in spaces_by_agent}
    rollout = Rollout(per_agent, {a: o[::-1].copy() for a, o in per_agent.items()},
                      {a: rng.integers(0, 2, (4, 2)) for a in spaces_by_agent}, zeros,
                      {a: np.zeros((4, 2), dtype=bool) for a in spaces_by_agent},
                      {a: np.zeros((4, 2), dtype=bool) for a in spaces_by_agent}, alive, {}, zeros, zeros, zeros, zeros)
    rewards = extension.intrinsic_rewards(rollout)
    assert (rewards["predator"] > 0).all()
    assert (rewards["prey"][alive["prey"]] > 0).all() and (rewards["prey"][~alive["prey"]] == 0).all()


def test_normalised_reward_is_the_raw_one_over_the_std_of_its_discounted_return(tmp_path):
    rollout = corridor_rollout(np.random.default_rng(2).integers(0, 30, (16, 8)), LENGTH)
    raw = corridor_extension(seed=0, eta=7.0).intrinsic_rewards(rollout)[SINGLE_AGENT].astype(np.float64)
    extension = corridor_extension(seed=0, eta=7.0, normalize_intrinsic=True, intrinsic_coef=0.5, gamma=0.9)
    normalised = extension.intrinsic_rewards(rollout)[SINGLE_AGENT]
    returns = np.zeros_like(raw)
    running = np.zeros(raw.shape[1])
    for t in range(len(raw)):
        running = 0.9 * running + raw[t]
        returns[t] = running
    np.testing.assert_allclose(normalised, 0.5 * raw / returns.std(), rtol=1e-4)
    # the statistics travel with the checkpoint: a resumed run scales the next rollout alike
    checkpoint.save(tmp_path / "icm.rlf", {"extension": extension.state_dict()})
    resumed = corridor_extension(seed=0, eta=7.0, normalize_intrinsic=True, intrinsic_coef=0.5, gamma=0.9)
    resumed.load_state_dict(checkpoint.load(tmp_path / "icm.rlf")["extension"])
    np.testing.assert_array_equal(resumed.intrinsic_rewards(rollout)[SINGLE_AGENT],
                                  extension.intrinsic_rewards(rollout)[SINGLE_AGENT])

"""The extension point curiosity plugins (ICM, RND, kNN) build on: hooks, order and effects."""

import numpy as np
import torch
from ppo_helpers import fake_rollout, make_pair, single_spec, weights
from ppo_test_envs import ppo_only_registry, register_algorithm
from rlf_plugin_ppo import Minibatch, PPOConfig, PPOExtension, PPOLearner, build_agent

import rlf
from rlf import SINGLE_AGENT, compute_gae
from rlf.testing import restore_only

BONUS = 0.5
EXTRA = 0.25


class ConstantBonus(PPOExtension):
    """Adds a constant intrinsic reward and extra advantage, and trains one scalar towards 3."""

    def __init__(self, bonus: float = BONUS, extra: float = EXTRA):
        self.bonus, self.extra = bonus, extra
        self.calls: list[str] = []
        self.minibatches: list[Minibatch] = []
        self.weight = torch.nn.Parameter(torch.tensor(0.0))

    def bind(self, learner):
        super().bind(learner)
        self.calls.append("bind")

    def parameters(self):
        self.calls.append("parameters")
        return [self.weight]

    def intrinsic_rewards(self, rollout):
        self.calls.append("intrinsic_rewards")
        return {a: np.full_like(r, self.bonus) for a, r in rollout.rewards.items()}

    def extra_advantages(self, rollout):
        self.calls.append("extra_advantages")
        return {a: np.full(r.shape, self.extra, dtype=np.float32) for a, r in rollout.rewards.items()}

    def loss(self, minibatch):
        self.calls.append("loss")
        self.minibatches.append(minibatch)
        loss = (self.weight - 3.0) ** 2
        return loss, {"bonus_loss": loss.item()}

    def metrics(self):
        self.calls.append("metrics")
        return {"intrinsic_reward": self.bonus}

    def state_dict(self):
        return {"weight": self.weight.item()}

    def load_state_dict(self, state):
        with torch.no_grad():
            self.weight.fill_(state["weight"])


def test_hooks_run_in_the_documented_order():
    extension = ConstantBonus()
    agent, learner = make_pair(single_spec(), extension=extension, epochs=3, minibatches=2)
    assert extension.calls == ["bind", "parameters"] and extension.learner is learner
    learner.learn(fake_rollout(agent))
    assert extension.calls[2:] == ["intrinsic_rewards", "extra_advantages", *["loss"] * 6, "metrics"]


def test_intrinsic_rewards_rerun_gae_and_extra_advantages_add_on_top():
    extension = ConstantBonus()
    agent, learner = make_pair(single_spec(), extension=extension, gamma=0.9, gae_lambda=0.8)
    rollout = fake_rollout(agent, gamma=0.9, gae_lambda=0.8)
    learner.learn(rollout)
    a = SINGLE_AGENT
    advantages, returns = compute_gae(rollout.rewards[a] + BONUS, rollout.values[a], rollout.next_values[a],
                                      rollout.terminated[a], rollout.dones[a], 0.9, 0.8)
    np.testing.assert_allclose(learner.last_advantages[a], advantages + EXTRA, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(learner.last_returns[a], returns, rtol=1e-6, atol=1e-6)
    # a positive bonus raises every advantage relative to the extrinsic-only ones
    assert (learner.last_advantages[a] > rollout.advantages[a]).all()


def test_the_bonus_changes_the_update_and_the_extension_is_trained_with_ppo():
    plain_agent, plain = make_pair(single_spec(), seed=4)
    bonus_agent, with_bonus = make_pair(single_spec(), seed=4, extension=ConstantBonus(extra=0.0))
    plain.learn(fake_rollout(plain_agent, seed=9))
    metrics = with_bonus.learn(fake_rollout(bonus_agent, seed=9))
    critic = "critic.0.weight"
    assert not np.allclose(weights(plain_agent)[SINGLE_AGENT][critic], weights(bonus_agent)[SINGLE_AGENT][critic])
    assert 0.0 < with_bonus.extension.weight.item() < 3.0  # stepped towards 3 by the shared optimizer
    assert metrics["intrinsic_reward"] == BONUS and "bonus_loss" in metrics and "policy_loss" in metrics


def test_minibatches_carry_one_agents_flattened_rollout():
    extension = ConstantBonus()
    agent, learner = make_pair(single_spec(num_envs=3), extension=extension, epochs=2, minibatches=4)
    alive = {SINGLE_AGENT: np.ones((8, 3), dtype=bool)}
    alive[SINGLE_AGENT][4:, 2] = False
    rollout = fake_rollout(agent, steps=8, alive=alive)
    learner.learn(rollout)
    flat = {name: getattr(rollout, name)[SINGLE_AGENT].reshape(24, *getattr(rollout, name)[SINGLE_AGENT].shape[2:])
            for name in ("obs", "next_obs", "actions", "dones")}
    seen = []
    for minibatch in extension.minibatches:
        index = minibatch.indices.numpy()
        assert minibatch.agent_id == SINGLE_AGENT
        np.testing.assert_array_equal(minibatch.obs.numpy(), flat["obs"][index])
        np.testing.assert_array_equal(minibatch.next_obs.numpy(), flat["next_obs"][index])
        np.testing.assert_array_equal(minibatch.actions.numpy(), flat["actions"][index])
        np.testing.assert_array_equal(minibatch.dones.numpy(), flat["dones"][index])
        seen.extend(index.tolist())
    dead = set(np.flatnonzero(~alive[SINGLE_AGENT].reshape(-1)).tolist())
    assert not dead & set(seen)
    assert sorted(seen) == sorted(2 * sorted(set(range(24)) - dead))  # every live sample once per epoch


def build_bonus_learner(context, agent):
    return PPOLearner(agent, context.config, context, extension=ConstantBonus())


def test_an_extension_plugin_reuses_ppos_agent_and_checkpoints(tmp_path):
    registry = ppo_only_registry(("bonus-plugin", register_algorithm("ppo-bonus", build_agent,
                                                                     build_bonus_learner, PPOConfig)))
    algo = rlf.make("ppo-bonus", "gym:CartPole-v1", registry=registry, overrides=[
        "steps=512", "num_envs=2", "algo.rollout_steps=64", "progress=false", f"run_dir='{tmp_path}'"])
    summary = algo.train()
    assert summary["intrinsic_reward"] == BONUS and "bonus_loss" in summary
    trained_weight = algo.strategy.learner.extension.weight.item()
    resumed = rlf.load(tmp_path, registry=registry)
    restore_only(resumed)
    assert trained_weight != 0.0
    assert resumed.strategy.learner.extension.weight.item() == trained_weight

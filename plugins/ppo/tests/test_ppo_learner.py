import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from ppo_helpers import fake_rollout, make_pair, make_spec, single_spec, weights
from rlf_plugin_ppo.loss import clipped_surrogate_loss, value_loss

import rlf
from rlf import SINGLE_AGENT, ConfigError

METRICS = {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "learning_rate",
           "explained_variance"}


def adam_steps(learner) -> set[int]:
    return {int(state["step"]) for state in learner.optimizer.state.values()}


def test_learn_updates_the_policy_and_reports_metrics():
    agent, learner = make_pair(single_spec(), epochs=3, minibatches=4)
    before = weights(agent)
    metrics = learner.learn(fake_rollout(agent))
    assert METRICS <= set(metrics) and all(math.isfinite(v) for v in metrics.values())
    assert metrics["entropy"] > 0 and metrics["approx_kl"] >= 0 and 0 <= metrics["clip_fraction"] <= 1
    after = weights(agent)
    assert all(not np.array_equal(before[SINGLE_AGENT][k], after[SINGLE_AGENT][k]) for k in before[SINGLE_AGENT])
    assert adam_steps(learner) == {3 * 4}
    assert learner.updates == 1 and learner.env_steps == 16 * 4


def test_the_update_favours_actions_with_positive_advantage():
    agent, learner = make_pair(single_spec(), epochs=4, minibatches=2, lr=1e-3, anneal_lr=False, entropy_coef=0.0)
    rollout = fake_rollout(agent, steps=32)
    # action 0 was always better than expected, action 1 always worse
    advantages = np.where(rollout.actions[SINGLE_AGENT] == 0, 1.0, -1.0).astype(np.float32)
    rollout.advantages[SINGLE_AGENT] = advantages
    obs = torch.as_tensor(rollout.obs[SINGLE_AGENT].reshape(-1, 4))
    taken = torch.as_tensor(rollout.actions[SINGLE_AGENT].reshape(-1))

    def probs():
        with torch.no_grad():
            logits, _ = agent.networks[SINGLE_AGENT](obs)
        return torch.softmax(logits, -1)

    before = probs()
    metrics = learner.learn(rollout)
    after = probs()
    assert after[:, 0].mean() > before[:, 0].mean() + 0.01
    ratio = (after / before)[torch.arange(len(taken)), taken].numpy()
    weights_ = advantages.reshape(-1)
    assert np.mean(weights_ * ratio) > np.mean(weights_) + 0.01  # the surrogate objective went up
    assert metrics["approx_kl"] > 0


def test_the_surrogate_gives_no_gradient_beyond_the_clip_range():
    ratios = torch.tensor([0.5, 0.9, 1.1, 1.5, 0.5, 1.5])
    advantages = torch.tensor([1.0, 1.0, 1.0, 1.0, -1.0, -1.0])
    log_ratio = ratios.log().requires_grad_()
    loss = clipped_surrogate_loss(log_ratio, advantages, clip=0.2)
    loss.backward()
    grad = log_ratio.grad.numpy()
    # inside the range every sample pulls; a good action already 1.5x likelier, or a bad one already
    # halved, gets no further push; the pessimistic bound keeps pulling the others back
    assert (grad[[0, 1, 2, 5]] != 0).all() and grad[3] == 0 and grad[4] == 0
    np.testing.assert_allclose(loss.item(), -np.mean([0.5, 0.9, 1.1, 1.2, -0.8, -1.5]), rtol=1e-6)


def test_learning_rate_anneals_linearly_over_the_run():
    agent, learner = make_pair(single_spec(), steps=256, lr=0.01)
    rollout = fake_rollout(agent, steps=16)  # 64 env steps
    rates = [learner.learn(rollout)["learning_rate"] for _ in range(3)]
    np.testing.assert_allclose(rates, [0.01, 0.0075, 0.005])
    _, constant = make_pair(single_spec(), steps=256, lr=0.01, anneal_lr=False)
    assert [constant.learn(rollout)["learning_rate"] for _ in range(2)] == [0.01, 0.01]


def test_an_explicit_schedule_horizon_does_not_depend_on_the_run_budget():
    # the same learner state under a 256- and a 1024-step budget: with schedule_steps the rates agree
    rates = {}
    for budget in (256, 1024):
        agent, learner = make_pair(single_spec(), steps=budget, lr=0.01, schedule_steps=128, anneal_clip=True)
        rollout = fake_rollout(agent, steps=16)  # 64 env steps
        rates[budget] = [(m["learning_rate"], m["clip_coef"]) for m in (learner.learn(rollout) for _ in range(3))]
    np.testing.assert_allclose(rates[256], [(0.01, 0.2), (0.005, 0.1), (0.0, 0.0)])
    assert rates[1024] == rates[256]


def test_clip_range_anneals_on_the_learning_rates_schedule_when_asked():
    agent, learner = make_pair(single_spec(), steps=256, anneal_clip=True, clip_coef=0.2)
    rollout = fake_rollout(agent, steps=16)  # 64 env steps
    np.testing.assert_allclose([learner.learn(rollout)["clip_coef"] for _ in range(3)], [0.2, 0.15, 0.1])
    _, constant = make_pair(single_spec(), steps=256, clip_coef=0.2)
    assert [constant.learn(rollout)["clip_coef"] for _ in range(2)] == [0.2, 0.2]


def test_the_annealed_clip_range_is_the_one_the_update_uses():
    # At the end of the schedule the range is 0: every ratio that moved at all counts as clipped,
    # where the full range of 0.3 clips none after the same small steps.
    fractions = {}
    for anneal in (False, True):
        agent, learner = make_pair(single_spec(), steps=64, anneal_clip=anneal, anneal_lr=False, clip_coef=0.3,
                                   lr=1e-4, epochs=3, minibatches=1)
        rollout = fake_rollout(agent, steps=16)
        learner.env_steps = 64
        fractions[anneal] = learner.learn(rollout)["clip_fraction"]
    assert fractions[False] == 0.0 and fractions[True] > 0.5


def test_dead_steps_are_masked_out_of_the_update():
    spec = make_spec({"a": spaces.Box(-1, 1, (3,), np.float32), "b": spaces.Box(-1, 1, (3,), np.float32)},
                     {"a": spaces.Discrete(3), "b": spaces.Discrete(3)}, num_envs=3)
    alive = {"a": np.ones((12, 3), dtype=bool), "b": np.zeros((12, 3), dtype=bool)}
    alive["a"][6:, 1] = False  # agent a left env 1 halfway
    agent1, learner1 = make_pair(spec, seed=3)
    agent2, learner2 = make_pair(spec, seed=3)
    clean = fake_rollout(agent1, steps=12, seed=5, alive=alive)
    garbage = fake_rollout(agent1, steps=12, seed=6, alive=alive)  # other obs, actions, rewards, values
    dead = ~alive["a"]
    for field in ("obs", "next_obs", "actions", "rewards", "values", "advantages", "returns"):
        array = getattr(garbage, field)["a"].copy()
        array[~dead] = getattr(clean, field)["a"][~dead]
        if field in ("advantages", "returns"):
            array[dead] = 1e6
        getattr(garbage, field)["a"] = array
    for key in ("log_prob", "value"):
        array = garbage.extras["a"][key].copy()
        array[~dead] = clean.extras["a"][key][~dead]
        garbage.extras["a"][key] = array
    b_before = weights(agent1)["b"]
    metrics = learner1.learn(clean)
    learner2.learn(garbage)
    w1, w2 = weights(agent1), weights(agent2)
    for key in w1["a"]:
        np.testing.assert_array_equal(w1["a"][key], w2["a"][key])
    for key in b_before:  # never alive: never updated
        np.testing.assert_array_equal(w1["b"][key], b_before[key])
    assert all(math.isfinite(v) for v in metrics.values())


def test_target_kl_stops_the_update_early():
    agent, learner = make_pair(single_spec(), epochs=5, minibatches=4, target_kl=1e-12, lr=1e-2)
    learner.learn(fake_rollout(agent))
    assert adam_steps(learner) == {1}


def test_value_clipping_bounds_the_value_change():
    _, plain = make_pair(single_spec())
    _, clipped = make_pair(single_spec(), value_clip=0.1)
    old = torch.zeros(4)
    values = torch.full((4,), 1.0)
    returns = torch.full((4,), 1.0)
    assert value_loss(values, old, returns, plain.config.value_clip).item() == 0.0
    # the clipped prediction (0.1) is 0.9 short of the return; the loss takes the worse of the two
    assert value_loss(values, old, returns, clipped.config.value_clip).item() == pytest.approx(0.5 * 0.9 ** 2)


def test_learner_state_round_trip_restores_optimizer_counters_and_rng():
    agent, learner = make_pair(single_spec(), seed=2)
    rollout = fake_rollout(agent)
    learner.learn(rollout)
    state = learner.state_dict()
    agent_state = agent.state_dict()
    learner.learn(rollout)
    expected = weights(agent)

    agent2, learner2 = make_pair(single_spec(), seed=50)
    agent2.load_state_dict(agent_state)
    learner2.load_state_dict(state)
    assert (learner2.updates, learner2.env_steps) == (1, 64)
    learner2.learn(rollout)
    for key, value in expected[SINGLE_AGENT].items():
        np.testing.assert_allclose(weights(agent2)[SINGLE_AGENT][key], value, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(("override", "message"), [
    ("algo.async_workers=2", "unknown key 'algo.async_workers'"),  # A3C's strategy setting
    ("algo.lr=-1", "algo.lr"),
    ("algo.hidden_sizes=[0]", "hidden width"),
    ("algo.network='transformer'", "algo.network"),
    ("algo.epoch=3", "did you mean algo.epochs"),
])
def test_bad_config_is_a_one_line_error(ppo_registry, override, message):
    with pytest.raises(ConfigError, match=message) as error:
        rlf.make("ppo", "gym:CartPole-v1", overrides=[override], registry=ppo_registry)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("config", [
    {},
    {"activation": "relu", "hidden_sizes": [32, 16], "entropy_coef": 0.05, "max_grad_norm": 0.05,
     "anneal_clip": True, "clip_coef": 0.05, "lr": 0.01, "minibatches": 8},
])
def test_the_numpy_update_takes_autograds_and_adams_steps(config):
    agent, learner = make_pair(single_spec(), seed=3, backend="numpy", **config)
    reference_agent, reference = make_pair(single_spec(), seed=3, **config)
    assert SINGLE_AGENT in learner.numpy_updates and not reference.numpy_updates
    for seed in range(3):
        rollout = fake_rollout(agent, steps=32, seed=seed)
        metrics, expected = learner.learn(rollout), reference.learn(rollout)
        for name, value in expected.items():
            assert metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-6), name
    for key, value in weights(reference_agent)[SINGLE_AGENT].items():
        np.testing.assert_allclose(weights(agent)[SINGLE_AGENT][key], value, rtol=1e-4, atol=1e-6)
    ours, theirs = learner.optimizer.state_dict()["state"], reference.optimizer.state_dict()["state"]
    assert ours.keys() == theirs.keys()
    for index, state in theirs.items():
        assert int(ours[index]["step"]) == int(state["step"])
        np.testing.assert_allclose(ours[index]["exp_avg_sq"], state["exp_avg_sq"], rtol=1e-3, atol=1e-9)
    # the numpy path's acting follows its parameters, which now live in one flat buffer
    obs = {SINGLE_AGENT: rollout.obs[SINGLE_AGENT][0]}
    np.testing.assert_allclose(agent.act(obs).extras[SINGLE_AGENT]["value"],
                               agent._act_torch(obs, True).extras[SINGLE_AGENT]["value"], rtol=1e-5, atol=1e-6)


def test_checkpoints_move_between_the_numpy_and_the_torch_update():
    def resumed(agent_state, learner_state, numpy: bool):
        agent, learner = make_pair(single_spec(), seed=50, backend="numpy" if numpy else "torch")
        agent.load_state_dict(agent_state)
        learner.load_state_dict(learner_state)
        return agent, learner

    def assert_same_weights(agent, expected):
        for key, value in expected.items():
            np.testing.assert_allclose(weights(agent)[SINGLE_AGENT][key], value, rtol=1e-4, atol=1e-6)

    agent, learner = make_pair(single_spec(), seed=2, backend="numpy")
    rollout = fake_rollout(agent)
    learner.learn(rollout)
    saved = agent.state_dict(), learner.state_dict()
    learner.learn(rollout)
    # a checkpoint of the numpy update, resumed by torch's
    torch_agent, torch_learner = resumed(*saved, numpy=False)
    torch_learner.learn(rollout)
    assert_same_weights(torch_agent, weights(agent)[SINGLE_AGENT])
    # and one of torch's, resumed by numpy's, with Adam's step counts carried on
    saved = torch_agent.state_dict(), torch_learner.state_dict()
    torch_learner.learn(rollout)
    numpy_agent, numpy_learner = resumed(*saved, numpy=True)
    assert SINGLE_AGENT in numpy_learner.numpy_updates
    numpy_learner.learn(rollout)
    assert_same_weights(numpy_agent, weights(torch_agent)[SINGLE_AGENT])
    assert {int(s["step"]) for s in numpy_learner.optimizer.state.values()} == {3 * 4 * 4}

"""The agent and learner on hand-made rollouts: update directions, units, masks, sharing between
processes, config, registration."""

import multiprocessing as mp

import numpy as np
import pytest
import torch
from rlf_plugin_a3c.config import A3CConfig
from rlf_plugin_a3c.factory import build_agent, build_learner
from rlf_plugin_actor_critic.testing import (  # noqa: F401  (the family's shared tests, collected here)
    OBS,
    Family,
    check_one_line_config_error,
    probs,
    rollout,
    test_a_checkpoint_of_other_settings_is_refused_in_one_line,
    test_an_agent_absent_from_a_whole_rollout_is_skipped,
    test_continuous_actions_are_refused_with_a_hint,
    test_new_return_statistics_leave_the_critic_s_answers_in_reward_units_unchanged,
    test_observations_are_encoded_by_their_space,
    test_registration_is_light_and_complete,
    test_rows_where_the_agent_was_not_alive_do_not_touch_the_update,
    test_sampling_is_reproducible_from_the_saved_state,
    test_the_critic_learns_normalised_returns_but_answers_in_reward_units,
    test_the_policy_moves_towards_positive_advantages,
)

import rlf

FAMILY = Family("a3c", A3CConfig, build_agent, build_learner, defaults={"async_workers": 0}, strategy="async-workers")
make_pair = FAMILY.make_pair


@pytest.fixture
def family():
    return FAMILY


def _learn_in_a_child(learner, batch, seed):
    def child():
        learner.context.seed = seed  # what the core's worker does before worker_init
        learner.worker_init()
        learner.learn(batch)

    process = mp.get_context("fork").Process(target=child)
    process.start()
    process.join(timeout=60)
    assert process.exitcode == 0


def _toy_batch():
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 1, 2)).astype(np.float32)
    actions = np.ones((5, 1), dtype=np.int64)
    return rollout(obs, actions, np.full((5, 1), 2.0), np.linspace(-40, 60, 5)[:, None])


def test_learning_in_forked_workers_updates_the_one_shared_model():
    agent, learner = make_pair(async_workers=2)
    net = agent.nets["a"]
    assert all(p.is_shared() for p in net.parameters())
    before = [p.detach().clone() for p in net.parameters()]
    for seed in (11, 12):
        _learn_in_a_child(learner, _toy_batch(), seed)
    # Both workers' updates reached this process: weights, Adam's moments and step count, statistics.
    assert all(not torch.equal(b, p) for b, p in zip(before, net.parameters(), strict=True))
    state = learner.optimizers["a"].state
    assert all(float(state[p]["step"]) == 2.0 for p in net.parameters())
    assert all(state[p]["exp_avg_sq"].abs().sum() > 0 for p in net.parameters())
    assert agent.normalizers["a"].count == 10
    assert learner.updates == 2


def test_a_loaded_optimizer_state_is_shared_again():
    agent, learner = make_pair(async_workers=2)
    _learn_in_a_child(learner, _toy_batch(), 11)
    saved_agent, saved_learner = agent.state_dict(), learner.state_dict()
    agent2, learner2 = make_pair(async_workers=2)
    agent2.load_state_dict(saved_agent)
    learner2.load_state_dict(saved_learner)
    assert learner2.updates == 1 and agent2.normalizers["a"].count == 5
    _learn_in_a_child(learner2, _toy_batch(), 12)
    state = learner2.optimizers["a"].state
    assert all(float(state[p]["step"]) == 2.0 for p in agent2.nets["a"].parameters())
    assert agent2.normalizers["a"].count == 10 and learner2.updates == 2


def test_each_worker_samples_from_its_own_seed():
    agent, learner = make_pair(async_workers=2, n_actions=5)
    obs = {"a": np.zeros((64, 2), dtype=np.float32)}
    draws = []
    for seed in (1001, 2001, 1001):
        learner.context.seed = seed
        learner.worker_init()
        draws.append(agent.act(obs).actions["a"])
    assert np.array_equal(draws[0], draws[2]) and not np.array_equal(draws[0], draws[1])


def test_shared_workers_need_the_model_in_cpu_memory():
    with pytest.raises(rlf.ConfigError, match="device='cpu'"):
        make_pair(async_workers=2, device="cuda")


def test_default_settings_give_n_step_advantages_bootstrapped_at_the_rollout_end():
    config = A3CConfig()
    assert (config.rollout_steps, config.gae_lambda) == (5, 1.0)
    rng = np.random.default_rng(1)
    rewards, values = (rng.normal(size=(5, 3)).astype(np.float32) for _ in range(2))
    last = rng.normal(size=3).astype(np.float32)
    next_values = np.concatenate([values[1:], last[None]])
    terminated = np.zeros((5, 3), dtype=bool)
    terminated[2, 1] = True
    advantages, returns = rlf.compute_gae(rewards, values, next_values, terminated, terminated, config.gamma,
                                          config.gae_lambda)
    for env in range(3):
        for t in range(5):
            target, discount = 0.0, 1.0
            for k in range(t, 5):
                target += discount * rewards[k, env]
                discount *= config.gamma
                if terminated[k, env]:
                    discount = 0.0
                    break
            target += discount * last[env]
            assert returns[t, env] == pytest.approx(target, rel=1e-5, abs=1e-5)
            assert advantages[t, env] == pytest.approx(target - values[t, env], rel=1e-5, abs=1e-5)


def test_defaults_are_ppage_s():
    config = A3CConfig()
    assert (config.async_workers, config.rollout_steps, config.lr, config.entropy_coef) == (4, 5, 1e-3, 0.01)
    assert config.normalize_returns


@pytest.mark.parametrize(("override", "needle"), [
    ("algo.async_workers=65", "algo.async_workers"),
    ("algo.hidden_sizes=[64, 0]", "hidden width"),
    ("algo.lr=0", "algo.lr"),
    ("algo.entropy=0.1", "did you mean algo.entropy_coef"),
])
def test_bad_settings_are_one_line_errors(override, needle):
    check_one_line_config_error("a3c", override, needle)


def test_overlap_update_is_refused_beside_async_workers(tmp_path):
    with pytest.raises(rlf.ConfigError, match=r"algo: overlap_update=true applies to the synchronous strategy"):
        rlf.make("a3c", "gym:CartPole-v1", overrides=["algo.overlap_update=true", "progress=false",
                                                      f"run_dir='{tmp_path / 'run'}'"])
    assert not (tmp_path / "run").exists()

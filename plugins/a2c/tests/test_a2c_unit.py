"""The agent and learner on hand-made rollouts: update directions, units, masks, config, registration."""


import numpy as np
import pytest
from rlf_plugin_a2c.config import A2CConfig
from rlf_plugin_a2c.factory import build_agent, build_learner
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

FAMILY = Family("a2c", A2CConfig, build_agent, build_learner, actor_lr="actor_lr", critic_lr="critic_lr")
make_pair = FAMILY.make_pair


@pytest.fixture
def family():
    return FAMILY


def test_actor_and_critic_learn_at_their_own_rates_and_only_the_actor_decays():
    _, learner = make_pair(actor_weight_decay=0.02)
    actor_group, critic_group = learner.optimizers["a"].param_groups
    assert (actor_group["lr"], critic_group["lr"]) == (3e-4, 1e-3)
    assert actor_group["weight_decay"] == 0.02 and critic_group["weight_decay"] == 0.0


def test_default_settings_give_n_step_advantages_bootstrapped_at_the_rollout_end():
    config = A2CConfig()
    assert (config.rollout_steps, config.gae_lambda) == (5, 1.0)
    rng = np.random.default_rng(1)
    rewards, values = (rng.normal(size=(5, 3)).astype(np.float32) for _ in range(2))
    last = rng.normal(size=3).astype(np.float32)
    next_values = np.concatenate([values[1:], last[None]])
    terminated = np.zeros((5, 3), dtype=bool)
    terminated[2, 1] = True
    advantages, returns = rlf.compute_gae(rewards, values, next_values, terminated, terminated, config.gamma,
                                          config.gae_lambda)
    gamma = config.gamma
    for env in range(3):
        for t in range(5):
            target, discount = 0.0, 1.0
            for k in range(t, 5):
                target += discount * rewards[k, env]
                discount *= gamma
                if terminated[k, env]:
                    discount = 0.0
                    break
            target += discount * last[env]
            assert returns[t, env] == pytest.approx(target, rel=1e-5, abs=1e-5)
            assert advantages[t, env] == pytest.approx(target - values[t, env], rel=1e-5, abs=1e-5)


def test_defaults_are_ppage_s():
    config = A2CConfig()
    assert (config.actor_lr, config.critic_lr, config.entropy_coef, config.rollout_steps) == (3e-4, 1e-3, 0.05, 5)
    assert not config.normalize_returns


@pytest.mark.parametrize(("override", "needle"), [
    ("algo.async_workers=2", "unknown key 'algo.async_workers'"),  # A3C's strategy setting, not A2C's
    ("algo.lr=0.1", "unknown key 'algo.lr'"),
    ("algo.hidden_sizes=[64, 0]", "hidden width"),
    ("algo.actor_lr=0", "algo.actor_lr"),
    ("algo.entropy=0.1", "did you mean algo.entropy_coef"),
])
def test_bad_settings_are_one_line_errors(override, needle):
    check_one_line_config_error("a2c", override, needle)

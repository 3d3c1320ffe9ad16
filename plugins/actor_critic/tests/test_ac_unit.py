"""The agent and learner on hand-made rollouts: update directions, units, masks, config, registration."""


import numpy as np
import pytest
from rlf_plugin_actor_critic.config import ActorCriticConfig
from rlf_plugin_actor_critic.factory import build_agent, build_learner
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

FAMILY = Family("actor-critic", ActorCriticConfig, build_agent, build_learner)
make_pair = FAMILY.make_pair


@pytest.fixture
def family():
    return FAMILY


def test_weight_decay_applies_to_the_actor_only():
    _, learner = make_pair(actor_weight_decay=0.02)
    actor_group, critic_group = learner.optimizers["a"].param_groups
    assert actor_group["weight_decay"] == 0.02 and critic_group["weight_decay"] == 0.0
    assert actor_group["lr"] == critic_group["lr"] == 1e-3


def test_default_settings_give_one_step_td_advantages_even_over_longer_rollouts():
    config = ActorCriticConfig()
    assert (config.rollout_steps, config.gae_lambda) == (1, 0.0)
    rng = np.random.default_rng(1)
    rewards, values, next_values = (rng.normal(size=(4, 3)).astype(np.float32) for _ in range(3))
    terminated = np.zeros((4, 3), dtype=bool)
    terminated[2, 1] = True
    advantages, returns = rlf.compute_gae(rewards, values, next_values, terminated, terminated, config.gamma,
                                          config.gae_lambda)
    target = rewards + config.gamma * next_values * ~terminated
    np.testing.assert_allclose(returns, target, rtol=1e-6)
    np.testing.assert_allclose(advantages, target - values, rtol=1e-5, atol=1e-6)


def test_defaults_are_ppage_s():
    config = ActorCriticConfig()
    assert (config.lr, config.value_coef, config.entropy_coef, config.actor_weight_decay) == (1e-3, 0.5, 0.01, 1e-3)
    assert config.normalize_returns


@pytest.mark.parametrize(("override", "needle"), [
    ("algo.async_workers=2", "unknown key 'algo.async_workers'"),  # A3C's strategy setting
    ("algo.hidden_sizes=[64, 0]", "hidden width"),
    ("algo.lr=0", "algo.lr"),
    ("algo.entropy=0.1", "did you mean algo.entropy_coef"),
])
def test_bad_settings_are_one_line_errors(override, needle):
    check_one_line_config_error("actor-critic", override, needle)

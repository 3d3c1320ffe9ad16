"""Action masks (rlf.masking): the rule every agent applies, and the errors for a mask that does not fit the
actions. The core env has no torch: rlf.nn.mask_logits is tested with PPO (plugins/ppo/tests/test_ppo_masking.py).
Each algorithm's own test checks that it honours masks in acting and learning (plugins/*/tests/*masking*)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from rlf import ConfigError
from rlf.masking import ACTION_MASK_KEY, action_mask, has_mask, masked_argmax, sample_allowed


def dict_space(mask_space):
    return spaces.Dict({ACTION_MASK_KEY: mask_space, "x": spaces.Box(-1.0, 1.0, (2,), np.float32)})


def test_a_mask_part_is_recognised_only_where_it_fits_the_actions():
    assert has_mask(dict_space(spaces.Box(0, 1, (4,), np.int8)), spaces.Discrete(4))
    assert has_mask(dict_space(spaces.MultiBinary(4)), spaces.Discrete(4))
    assert not has_mask(spaces.Box(-1.0, 1.0, (4,), np.float32), spaces.Discrete(4))
    with pytest.raises(ConfigError, match=r"needs a Box\(0, 1, \(4,\)\)") as wrong_size:
        has_mask(dict_space(spaces.Box(0, 1, (3,), np.int8)), spaces.Discrete(4), "agent 'a'")
    assert str(wrong_size.value).startswith("agent 'a'") and "\n" not in str(wrong_size.value)
    with pytest.raises(ConfigError, match="masks Discrete actions"):
        has_mask(dict_space(spaces.Box(0, 1, (2,), np.int8)), spaces.Box(-1.0, 1.0, (2,), np.float32))


def test_rows_that_allow_nothing_allow_everything():
    batch = {ACTION_MASK_KEY: np.array([[0, 1, 0], [0, 0, 0]], dtype=np.int8), "x": np.zeros((2, 2))}
    assert action_mask(batch).tolist() == [[False, True, False], [True, True, True]]
    assert action_mask(np.zeros((2, 3))) is None


def test_greedy_and_random_choices_keep_to_the_allowed_actions():
    rng = np.random.default_rng(0)
    mask = rng.random((2000, 5)) < 0.4
    mask[~mask.any(axis=1), 0] = True
    values = rng.normal(size=(2000, 5))
    greedy = masked_argmax(values, mask)
    assert mask[np.arange(2000), greedy].all()
    assert np.array_equal(greedy, np.where(mask, values, -np.inf).argmax(axis=1))
    drawn = sample_allowed(rng, mask)
    assert mask[np.arange(2000), drawn].all()
    # uniform over the allowed ones: a row allowing actions 1 and 3 gets each about half the time
    row = np.zeros((20000, 5), dtype=bool)
    row[:, [1, 3]] = True
    counts = np.bincount(sample_allowed(rng, row), minlength=5)
    assert counts[[0, 2, 4]].sum() == 0 and abs(counts[1] / 20000 - 0.5) < 0.02


def test_a_mask_given_in_info_becomes_the_observation_s_mask_part():
    import gymnasium

    from rlf.masking import MaskFromInfo

    env = MaskFromInfo(gymnasium.make("Taxi-v4"))  # Taxi gives its mask in info["action_mask"]
    assert has_mask(env.observation_space, env.action_space)
    obs, info = env.reset(seed=0)
    assert obs[ACTION_MASK_KEY].tolist() == np.asarray(info["action_mask"]).tolist()
    assert env.observation_space.contains(obs)
    batch = {key: np.asarray(value)[None] for key, value in obs.items()}
    allowed = action_mask(batch)[0]
    obs, _, _, _, info = env.step(int(np.flatnonzero(allowed)[0]))
    assert obs[ACTION_MASK_KEY].tolist() == np.asarray(info["action_mask"]).tolist()
    with pytest.raises(ConfigError, match="masks Discrete actions"):
        MaskFromInfo(gymnasium.make("Pendulum-v1"))

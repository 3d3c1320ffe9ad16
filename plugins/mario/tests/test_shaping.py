import gymnasium
import numpy as np
import pytest
from conftest import RIGHT, run_episode
from rlf_plugin_mario.shaping import MarioRewardShaping


class Scripted(gymnasium.Env):
    """Replays (raw reward, score, flag_get, died) rows as Mario infos."""

    observation_space = gymnasium.spaces.Box(0, 255, (1,), np.uint8)
    action_space = gymnasium.spaces.Discrete(1)

    def __init__(self, rows):
        self.rows = rows

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.uint8), {"score": 100, "flag_get": False, "died": False}

    def step(self, action):
        raw, score, flag, died = self.rows[self.t]
        self.t += 1
        info = {"score": score, "flag_get": flag, "died": died}
        done = self.t == len(self.rows)
        if done:
            info["episode_metrics"] = {"raw_return": float(sum(r[0] for r in self.rows))}
        return np.zeros(1, np.uint8), raw, done, False, info


def test_shaping_formula():
    rows = [(2.0, 500, False, False),   # +400 score
            (1.0, 500, True, False),    # the flag turns on: bonus once
            (0.0, 700, True, False),    # flag still on: no second bonus
            (-25.0, 700, False, True)]  # death
    env = MarioRewardShaping(Scripted(rows), score_divisor=40, flag_bonus=50, death_penalty=50, scale=0.1)
    env.reset()
    rewards = [env.step(0)[1] for _ in range(3)]
    *_, info = env.step(0)
    assert rewards == pytest.approx([0.1 * (2 + 10), 0.1 * (1 + 50), 0.1 * 5])
    last = 0.1 * (-25 - 50)
    assert info["episode_metrics"] == pytest.approx({"raw_return": -22.0, "shaped_return": sum(rewards) + last})
    with pytest.raises(ValueError):
        MarioRewardShaping(Scripted(rows), scale=0.0)


def test_shaped_env_reports_raw_and_shaped_returns(make):
    plain, shaped = make(noop_max=0), make(noop_max=0, reward_shaping=True)
    plain.reset(seed=0)
    _, info = shaped.reset(seed=0)
    raw_total, steps, raw_info, *_ = run_episode(plain, RIGHT)
    shaped_total, shaped_steps, info, terminated, _ = run_episode(shaped, RIGHT)
    assert steps == shaped_steps and terminated and info["died"]
    metrics = info["episode_metrics"]
    assert metrics["raw_return"] == pytest.approx(raw_total) == pytest.approx(raw_info["episode_metrics"]["raw_return"])
    assert metrics["shaped_return"] == pytest.approx(shaped_total)
    assert shaped_total == pytest.approx(0.1 * (raw_total + info["score"] / 40 - 50))


def test_sparse_reward_pays_only_the_first_flag_step():
    from rlf_plugin_mario.shaping import MarioSparseReward

    rows = [(2.0, 500, False, False), (1.0, 500, True, False), (0.0, 700, True, False), (-25.0, 700, False, True)]
    flag = MarioSparseReward(Scripted(rows), flag_only=True)
    flag.reset()
    assert [flag.step(0)[1] for _ in rows] == [0.0, 1.0, 0.0, 0.0]
    silent = MarioSparseReward(Scripted(rows), flag_only=False)
    silent.reset()
    rewards, infos = zip(*[(r, i) for _, r, _, _, i in (silent.step(0) for _ in rows)], strict=True)
    assert rewards == (0.0,) * 4
    assert infos[-1]["episode_metrics"] == {"raw_return": -22.0}  # the game's reward is still reported


def test_sparse_env_hides_the_game_reward(make):
    plain, sparse = make(noop_max=0), make(noop_max=0, extrinsic_reward="flag")
    plain.reset(seed=0)
    sparse.reset(seed=0)
    raw_total, steps, raw_info, *_ = run_episode(plain, RIGHT)
    total, sparse_steps, info, terminated, _ = run_episode(sparse, RIGHT)
    assert steps == sparse_steps and terminated and raw_total > 100
    assert total == 0.0  # died before the flag
    assert info["episode_metrics"]["raw_return"] == pytest.approx(raw_total)
    assert info["episode_metrics"]["x_pos_max"] == raw_info["episode_metrics"]["x_pos_max"]


def test_sparse_reward_and_shaping_exclude_each_other():
    from pydantic import ValidationError
    from rlf_plugin_mario.config import MarioConfig

    assert MarioConfig(extrinsic_reward="none").extrinsic_reward == "none"
    with pytest.raises(ValidationError, match="reward_shaping shapes the game's reward"):
        MarioConfig(extrinsic_reward="flag", reward_shaping=True)
    with pytest.raises(ValidationError):
        MarioConfig(extrinsic_reward="coins")

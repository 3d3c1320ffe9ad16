"""Subprocess vector envs: picklable factories, independent emulators, and rlf's async training path."""

import csv
import pickle

import gymnasium
import numpy as np
from conftest import NOOP, RIGHT, RIGHT_JUMP
from gymnasium.vector import AutoresetMode
from rlf_plugin_mario.config import MarioConfig
from rlf_plugin_mario.env import make_mario

import rlf
from rlf.envs import EnvFactory


def test_async_workers_are_independent_and_match_in_process(make):
    config = MarioConfig(max_episode_steps=6)
    factory = pickle.loads(pickle.dumps(EnvFactory(make_mario, config)))
    vector = gymnasium.vector.AsyncVectorEnv([factory] * 2, shared_memory=True, context="spawn",
                                             autoreset_mode=AutoresetMode.SAME_STEP)
    local = [make(max_episode_steps=6), make(max_episode_steps=6)]
    try:
        obs, _ = vector.reset(seed=5)
        for i, env in enumerate(local):
            np.testing.assert_array_equal(obs[i], env.reset(seed=5 + i)[0])
        actions = np.array([[RIGHT, NOOP], [RIGHT_JUMP, NOOP], [RIGHT, RIGHT]] * 2)
        for pair in actions:
            obs, rewards, terminated, truncated, infos = vector.step(pair)
            for i, env in enumerate(local):
                expected, reward, _, trunc, info = env.step(pair[i])
                if trunc:  # the vector env already reset; compare the final observation
                    np.testing.assert_array_equal(infos["final_obs"][i], expected)
                    assert infos["final_info"]["episode_metrics"]["x_pos_max"][i] == info["episode_metrics"]["x_pos_max"]
                else:
                    np.testing.assert_array_equal(obs[i], expected)
                assert rewards[i] == reward
        assert truncated.all() and infos["final_info"]["x_pos"][0] > infos["final_info"]["x_pos"][1]
    finally:
        vector.close()


def test_random_agent_trains_on_mario_in_subprocesses(tmp_path):
    run_dir = tmp_path / "run"
    algo = rlf.make("random", "mario", overrides=[
        "steps=256", "num_envs=2", "vector=async", "progress=false", f"run_dir='{run_dir}'",
        "env.max_episode_steps=40", "log_interval=128"])
    algo.train()
    with open(run_dir / "episodes.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) >= 4  # 128 steps per env, episodes of at most 40 steps
    for row in rows:
        assert float(row["x_pos_max"]) >= 40 and float(row["flag"]) == 0
        assert float(row["length"]) <= 40
        assert float(row["raw_return"]) == float(row["return"])  # no shaping: the same reward

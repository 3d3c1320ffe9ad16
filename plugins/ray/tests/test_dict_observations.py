"""Dict observations on Ray: vector=ray hands out the same dict batches as vector=async from the same seed
(each part in its own dtype, writable), and DQN learns GoalCells (an image and a vector, each worth
chance alone) through it."""

import numpy as np
from rlf_plugin_ray import RayCollectorConfig, RayVector

import rlf
from rlf import StepBatch
from rlf.envs import GymVector
from rlf.envs.gym import GymEnvConfig, make_gym_env
from rlf.testing import assert_trees_equal, read_csv

GOAL_CELLS = "gym:rlf.envs.goal_cells:GoalCells-v0"
FACTORY = rlf.EnvFactory(make_gym_env, GymEnvConfig(id="rlf.envs.goal_cells:GoalCells-v0"))
FIELDS = ("obs", "next_obs", "rewards", "terminated", "truncated", "alive")


def test_dict_batches_match_async_workers_bit_for_bit(local_ray):
    ray_envs = RayVector(GOAL_CELLS, FACTORY, 5, RayCollectorConfig(envs_per_actor=2))
    local_envs = GymVector(GOAL_CELLS, FACTORY, 5, subprocess=True)
    try:
        assert_trees_equal(ray_envs.reset(seed=4), local_envs.reset(seed=4))
        rng = np.random.default_rng(4)
        ended = 0
        for step in range(12):
            actions = {"agent": rng.integers(0, 4, size=5)}
            expected = local_envs.step(actions)
            if step % 2:
                got = ray_envs.step(actions)
            else:
                for index, rows in enumerate(ray_envs.parts):
                    ray_envs.step_async(index, {"agent": actions["agent"][rows]})
                got = StepBatch.concat([ray_envs.step_wait(index) for index in range(len(ray_envs.parts))])
            for name in FIELDS:
                assert_trees_equal(getattr(got, name), getattr(expected, name), f"{name} at step {step}")
            image = got.obs["agent"]["image"]
            assert image.dtype == np.uint8 and image.shape == (5, 16, 16, 1) and image.flags.writeable
            ended += len(got.ended_envs)
        assert ended == 15  # episodes of 4 steps: the final observations were in next_obs three times
    finally:
        ray_envs.close()
        local_envs.close()


def test_dqn_learns_goal_cells_on_ray(local_ray, tmp_path):
    # measured with vector=sync (plugins/dqn/tests/test_dict_observations.py): near-perfect by ~2,400 steps
    algo = rlf.make("dqn", GOAL_CELLS, overrides=[
        "progress=false", f"run_dir='{tmp_path}'", "checkpoint_interval=0", "steps=4000", "seed=0", "num_envs=4",
        "vector=ray", "algo.min_replay_size=256", "algo.target_update_interval=100", "algo.torch_threads=1",
        "eval_interval=4000", "eval_episodes=20"])
    algo.train()
    final = read_csv(tmp_path / "eval.csv")[-1]
    assert final["env_step"] == 4000 and final["return"] >= 3.5, final  # chance is 1.0, perfect 4.0

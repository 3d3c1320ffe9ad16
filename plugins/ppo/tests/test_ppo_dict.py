"""Dict observations: PPO reads them through rlf.nn's MultiInputEncoder (an MLP per vector part, a CNN
per image part) and learns GoalCells (rlf.envs.goal_cells), where an image and a vector are each worth
chance alone and perfect play together: 4 steps per episode paid 1 for the right action, so chance
scores 1 and perfect play 4. Exact resume with Dict rollouts: tests/reliability (the on-policy parts cases)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch
from gymnasium import spaces
from ppo_helpers import make_pair, single_spec

from rlf import ConfigError
from rlf.cli.commands import main
from rlf.nn import MultiInputEncoder

GOAL_CELLS = "gym:rlf.envs.goal_cells:GoalCells-v0"
A = "agent"


@pytest.mark.parametrize("vector", ["sync", "async"])
def test_ppo_learns_goal_cells_from_rlf_train(vector, tmp_path):
    # measured (seed 0, sync, 2026-12-07): greedy 3.8 of 4 at 4,096 env steps, 4.0 at 8,192
    run = tmp_path / "run"
    assert main(["train", "ppo", "--env", GOAL_CELLS, "--steps", "8192", "--seed", "0", "--no-progress",
                 "--set", "num_envs=8", "--set", "algo.rollout_steps=32", "--set", "algo.epochs=8",
                 "--set", "algo.minibatches=4", "--set", "algo.lr=0.003", "--set", "algo.gamma=0.5", "--set", "eval_interval=8192",
                 "--set", "eval_episodes=20", "--set", "loggers=['csv']", "--set", f"vector={vector}",
                 "--run-dir", str(run)]) == 0
    with open(run / "eval.csv") as handle:
        final = list(csv.DictReader(handle))[-1]
    assert float(final["return"]) >= 3.5, final  # chance 1, perfect 4


def test_image_parts_get_a_cnn_and_the_batch_stays_a_dict():
    space = spaces.Dict({"image": spaces.Box(0, 255, (40, 40, 1), np.uint8),
                         "vector": spaces.Box(-1.0, 1.0, (3,), np.float32)})
    agent, learner = make_pair(single_spec(obs_space=space), cnn_features=32, epochs=1, minibatches=2)
    network = agent.networks[A]
    assert isinstance(network.encoder, MultiInputEncoder) and network.encoder.features == 32 + 3
    assert any(name.startswith("encoder.cnns.") for name, _ in network.named_parameters())
    rng = np.random.default_rng(0)
    obs = {"image": rng.integers(0, 256, (4, 40, 40, 1), dtype=np.uint8),
           "vector": rng.normal(size=(4, 3)).astype(np.float32)}
    acting = agent.act({A: obs})
    assert acting.actions[A].shape == (4,) and acting.extras[A]["value"].shape == (4,)
    assert not agent.numpy_acting  # the numpy fast path reads plain vectors only


def test_observation_statistics_are_refused_for_dict_observations_in_one_line():
    space = spaces.Dict({"a": spaces.Box(-1.0, 1.0, (3,), np.float32)})
    with pytest.raises(ConfigError, match="algo.normalize_obs standardises vector observations") as error:
        make_pair(single_spec(obs_space=space), normalize_obs=True)
    assert "\n" not in str(error.value)


def test_a_gaussian_policy_reads_dict_observations_too():
    space = spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Discrete(3)))
    agent, _ = make_pair(single_spec(obs_space=space, action_space=spaces.Box(-1, 1, (2,), np.float32)))
    obs = (np.zeros((5, 2), np.float32), np.array([0, 1, 2, 0, 1]))
    acting = agent.act({A: obs})
    assert acting.actions[A].shape == (5, 2) and np.all(np.abs(acting.actions[A]) <= 1)
    assert torch.is_tensor(agent.tensor(obs)[0])

"""Dict observations: DQN builds the multi-input network, stores each part in replay (uint8 stays uint8),
and learns GoalCells (rlf.envs.goal_cells), where an image and a vector are each worth chance alone and
perfect play together, from `rlf train` with in-process and subprocess envs.

GoalCells-v0 pays 1 per step for the right action, 4 steps per episode: random play (or either part
alone) averages 1, perfect play 4. Measured (seed 0, 4 envs, sync): the training episodes' return passes
3.5 by ~2,400 env steps; the tests give 4,000 and ask 3.5 of the greedy evaluation.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from gymnasium import spaces

import rlf
from rlf import BuildContext, EnvSpec, Transitions
from rlf.nn import MultiInputEncoder, ObservationEncoder
from rlf.testing import assert_trees_equal

GOAL_CELLS = "gym:rlf.envs.goal_cells:GoalCells-v0"
LEARN = ["--steps", "4000", "--seed", "0", "--no-progress", "--set", "num_envs=4", "--set", "algo.min_replay_size=256",
         "--set", "algo.target_update_interval=100", "--set", "eval_interval=4000", "--set", "eval_episodes=20",
         "--set", "loggers=['csv']"]


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    main = "import sys; from rlf.cli.commands import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", main, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.mark.slow
@pytest.mark.parametrize("vector", ["sync", "async"])
def test_dqn_learns_goal_cells_from_rlf_train(vector, tmp_path):
    run = tmp_path / "run"
    done = _cli("train", "dqn", "--env", GOAL_CELLS, *LEARN, "--set", f"vector={vector}", "--run-dir", str(run),
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with open(run / "eval.csv") as handle:
        final = list(csv.DictReader(handle))[-1]
    assert int(final["env_step"]) == 4000
    assert float(final["return"]) >= 3.5, final  # chance is 1.0, perfect 4.0


def _space(image_side: int = 16) -> spaces.Dict:
    return spaces.Dict({"image": spaces.Box(0, 255, (image_side, image_side, 1), np.uint8),
                        "vector": spaces.Box(0.0, 1.0, (4,), np.float32)})


def _dqn(space, registry, **algo):
    spec = EnvSpec("test", ("agent",), {"agent": space}, {"agent": spaces.Discrete(4)}, False, 2)
    config = registry.algorithm("dqn").config(**{"min_replay_size": 8, "batch_size": 8, **algo})
    run = rlf.RunConfig(algorithm="dqn", env="test")
    context = BuildContext(spec, config, run, seed=0, device="cpu")
    from rlf_plugin_dqn.factory import build_agent, build_learner

    agent = build_agent(context)
    return agent, build_learner(context, agent)


def _batch(space, n: int, seed: int):
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]
    return {key: np.stack([s[key] for s in samples]) for key in space.spaces}


def test_images_large_enough_get_a_cnn_of_their_own_and_learn(registry):
    agent, learner = _dqn(_space(40), registry, cnn_hidden=32, hidden_sizes=[16])
    net = agent.networks["agent"]
    assert isinstance(net.torso.encoder, MultiInputEncoder)
    assert "0" in net.torso.encoder.cnns  # the image part, by position
    assert net.torso.encoder.features == 32 + 4
    before = {k: v.clone() for k, v in net.state_dict().items()}
    for step in range(6):
        obs, next_obs = _batch(_space(40), 2, step), _batch(_space(40), 2, 100 + step)
        learner.learn(Transitions({"agent": obs}, {"agent": np.array([0, 1])}, {"agent": np.ones(2, np.float32)},
                                  {"agent": next_obs}, {"agent": np.zeros(2, bool)}, {"agent": np.zeros(2, bool)},
                                  {"agent": np.ones(2, bool)}, np.zeros(2, bool)))
    replay = learner.buffers["agent"]
    assert replay.obs["image"].dtype == np.uint8 and replay.obs["vector"].dtype == np.float32
    changed = [k for k, v in net.state_dict().items() if not torch.equal(v, before[k])]
    assert any(k.startswith("torso.encoder.cnns.0") for k in changed), changed
    actions = agent.act({"agent": _batch(_space(40), 3, 7)}, explore=False).actions["agent"]
    assert actions.shape == (3,)


def test_replay_state_round_trips_dict_parts(registry):
    space = _space()
    _, learner = _dqn(space, registry)
    obs = _batch(space, 2, 1)
    learner.learn(Transitions({"agent": obs}, {"agent": np.array([2, 3])}, {"agent": np.ones(2, np.float32)},
                              {"agent": obs}, {"agent": np.zeros(2, bool)}, {"agent": np.zeros(2, bool)},
                              {"agent": np.array([True, False])}, np.zeros(2, bool)))
    state = learner.buffers["agent"].state_dict()
    assert set(state["obs"]) == {"image", "vector"} and len(state["obs"]["image"]) == 1  # the live row only
    np.testing.assert_array_equal(state["obs"]["image"][0], obs["image"][0])
    _, again = _dqn(space, registry)
    again.buffers["agent"].load_state_dict(state)
    assert_trees_equal(again.buffers["agent"].state_dict(), state)


def test_box_networks_keep_their_parameter_free_encoder():
    encoder = ObservationEncoder(spaces.Box(-1, 1, (4,)))
    assert type(encoder) is ObservationEncoder and not list(encoder.state_dict())

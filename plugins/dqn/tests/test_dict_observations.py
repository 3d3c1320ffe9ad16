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
    # the image part's frames are kept once (uint8), the vector beside them as float32
    assert replay.frames["image"].frames.dtype == np.uint8 and replay.plain["vector"].dtype == np.float32
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


def test_a_dict_agent_evaluates_and_exports_as_rlf_but_onnx_is_one_line(tmp_path):
    run = tmp_path / "run"
    done = _cli("train", "dqn", "--env", GOAL_CELLS, "--steps", "64", "--seed", "0", "--no-progress", "--set",
                "vector=sync", "--set", "algo.min_replay_size=16", "--set", "algo.batch_size=8", "--run-dir", str(run),
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = _cli("eval", str(run), "--episodes", "2", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "episodes" in shown.stdout
    refused = _cli("export", str(run), str(tmp_path / "policy.onnx"), cwd=tmp_path)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "agent 'agent' observes Dict observations" in lines[0], refused.stderr
    assert not (tmp_path / "policy.onnx").exists()
    exported = _cli("export", str(run), str(tmp_path / "agent.rlf"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    again = _cli("eval", str(tmp_path / "agent.rlf"), "--episodes", "2", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


STACKED = spaces.Dict({"frames": spaces.Box(0, 255, (4, 40, 40), np.uint8),
                       "vector": spaces.Box(-1.0, 1.0, (3,), np.float32)})


def _stack(env: int, t: int) -> np.ndarray:
    """Frames numbered per env and step (frame k is full of 10 * env + k), the last four stacked."""
    return np.stack([np.full((40, 40), 10 * env + max(k, 0), np.uint8) for k in range(t - 3, t + 1)])


def _fill(replay, steps: int = 12) -> None:
    for t in range(steps):
        obs = {"frames": np.stack([_stack(e, t) for e in (0, 1)]),
               "vector": np.array([[e, t, 0.5] for e in (0, 1)], np.float32)}
        next_obs = {"frames": np.stack([_stack(e, t + 1) for e in (0, 1)]),
                    "vector": np.array([[e, t + 1, 0.5] for e in (0, 1)], np.float32)}
        replay.add(obs, np.array([t % 4, (t + 1) % 4]), np.array([100 * e + t for e in (0, 1)], np.float32),
                   next_obs, np.zeros(2, np.float32), env_ids=np.array([0, 1]))


def test_image_stacks_in_a_dict_keep_each_frame_once(registry):
    _, learner = _dqn(STACKED, registry)
    replay = learner.buffers["agent"]
    assert type(replay).__name__ == "PartsReplay"
    _fill(replay)
    # whole stacks would be 2 envs x 12 steps x 2 (obs, next_obs) x 4 frames; each env writes its first
    # stack's one distinct frame once, then one new frame per step
    assert replay.frames["frames"].frames_written == 2 * (1 + 12)
    sample = replay.sample(64, np.random.default_rng(0))
    for row, reward in enumerate(sample["rewards"]):
        env, t = divmod(int(reward), 100)
        np.testing.assert_array_equal(sample["obs"]["frames"][row], _stack(env, t))
        np.testing.assert_array_equal(sample["next_obs"]["frames"][row], _stack(env, t + 1))
        assert sample["obs"]["vector"][row].tolist() == [env, t, 0.5]
        assert sample["next_obs"]["vector"][row].tolist() == [env, t + 1, 0.5]
        assert sample["actions"][row] == (t + env) % 4
    _, again = _dqn(STACKED, registry)
    again.buffers["agent"].load_state_dict(replay.state_dict())
    assert_trees_equal(again.buffers["agent"].sample(16, np.random.default_rng(3)),
                       replay.sample(16, np.random.default_rng(3)))


def test_frame_replay_off_stores_dict_parts_whole(registry):
    _, learner = _dqn(STACKED, registry, frame_replay="off")
    replay = learner.buffers["agent"]
    assert isinstance(replay, rlf.ReplayBuffer) and replay.obs["frames"].dtype == np.uint8
    with pytest.raises(ValueError, match="needs a uint8 image part"):
        _dqn(_space(), registry, frame_replay="on")

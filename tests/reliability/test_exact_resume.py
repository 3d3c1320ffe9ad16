"""Exact resume: a run killed with kill -9 and resumed ends bit-identical to one never interrupted.

Where every env of the core's collectors (in-process or in worker processes) says its state
(``rlf.envs.state``: Gymnasium's classic control through the core's adapters, predator-prey through its
own get_state/set_state), a checkpoint carries the episodes under way and the trainer's position
between metric rows. Each case trains once without interruption, once killed (SIGKILL, sent by the run
to itself at a chosen point, so the point is exact and no timing can make the test flaky) and resumed
with ``rlf train --resume``, then compares the final checkpoints array by array and the CSVs byte for
byte, less the one time-dependent column (``steps_per_second``; no other column of metrics.csv or
episodes.csv depends on the clock). A stop signal's checkpoint: test_exact_resume_signals.py.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rlf.storage import checkpoint as ckpt

TIME_COLUMNS = {"steps_per_second"}

# The real CLI, with the kill -9 placed exactly: right after the N-th interval checkpoint is on disk
# ("checkpoint:N"), or once the run has done S env steps, away from any checkpoint ("step:S").
CHILD = r"""
import os, signal, sys
die = os.environ.get("RLF_TEST_DIE")
if die:
    from rlf.training.trainer import Trainer
    kind, _, value = die.partition(":")
    value = int(value)
    real_checkpoint, real_emit = Trainer.checkpoint, Trainer.emit
    written = []
    def checkpoint(self, name=None):
        path = real_checkpoint(self, name)
        if kind == "checkpoint" and name is None:
            written.append(path)
            if len(written) == value:
                os.kill(os.getpid(), signal.SIGKILL)
        return path
    def emit(self, event, *args):
        real_emit(self, event, *args)
        if kind == "step" and event == "on_step" and self.counters["env_steps"] >= value:
            os.kill(os.getpid(), signal.SIGKILL)
    Trainer.checkpoint, Trainer.emit = checkpoint, emit
from rlf.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""

# log_interval does not divide checkpoint_interval: a checkpoint falls between metric rows, so the
# resumed run must continue the row schedule and the metrics averaged since the last row.
COMMON = ["--steps", "640", "--seed", "5", "--no-progress", "--set", "vector=sync", "--set", "num_envs=2",
          "--set", "log_interval=100", "--set", "checkpoint_interval=192", "--set", "loggers=['csv']"]
CASES = {
    "ppo": ["ppo", "--env", "gym:CartPole-v1", "--set", "algo.rollout_steps=32", "--set", "algo.minibatches=2",
            "--set", "algo.epochs=2", "--set", "algo.hidden_sizes=[16]"],
    # the update beside the next rollout's collection: a checkpoint keeps the rollout waiting for its update
    "ppo-overlap": ["ppo", "--env", "gym:CartPole-v1", "--set", "algo.rollout_steps=32", "--set", "algo.minibatches=2",
                    "--set", "algo.epochs=2", "--set", "algo.hidden_sizes=[16]", "--set", "algo.overlap_update=true"],
    # Box actions, and running observation and reward statistics that the checkpoint must carry
    "ppo-gaussian": ["ppo", "--env", "gym:Pendulum-v1", "--set", "algo.rollout_steps=32", "--set", "algo.minibatches=2",
                     "--set", "algo.epochs=2", "--set", "algo.hidden_sizes=[16]", "--set", "algo.normalize_obs=true",
                     "--set", "algo.normalize_reward=true"],
    # Dict observations in the rollout and the in-flight checkpoint
    "ppo-dict": ["ppo", "--env", "gym:rlf.envs.goal_cells:GoalCells-v0", "--set", "algo.rollout_steps=32",
                 "--set", "algo.minibatches=2", "--set", "algo.epochs=2", "--set", "algo.hidden_sizes=[16]"],
    # a recurrent policy: every env's memory is in the checkpoint, and the update re-runs stored sequences
    "ppo-lstm": ["ppo", "--env", "gym:rlf.envs.cartpole_positions:CartPolePositions-v1", "--set",
                 "algo.rollout_steps=32", "--set", "algo.minibatches=2", "--set", "algo.epochs=2", "--set",
                 "algo.memory='lstm'", "--set", "algo.memory_size=8", "--set", "algo.sequence_length=8",
                 "--set", "algo.hidden_sizes=[16]"],
    "dqn": ["dqn", "--env", "gym:CartPole-v1", "--set", "algo.min_replay_size=64", "--set", "algo.batch_size=16",
            "--set", "algo.hidden_sizes=[16]", "--set", "algo.target_update_interval=100"],
    "iql": ["iql", "--env", "predator-prey"],
    # Dict observations (an image and a vector): in-flight observations, replay and env state hold both parts
    "dqn-dict": ["dqn", "--env", "gym:rlf.envs.goal_cells:GoalCells-v0", "--set", "algo.min_replay_size=64",
                 "--set", "algo.batch_size=16", "--set", "algo.hidden_sizes=[16]", "--set",
                 "algo.target_update_interval=100"],
}
# the first interval checkpoint is at env step 192; the mid-way kill lands between 192 and 384
KILLS = {"after-checkpoint": "checkpoint:1", "between-checkpoints": "step:300"}


def _rlf(args: list[str], cwd: Path, die: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RLF_STRICT_PLUGINS", None)
    env.pop("RLF_TEST_DIE", None)
    if die:
        env["RLF_TEST_DIE"] = die
    return subprocess.run([sys.executable, "-c", CHILD, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _train(case: str, run: Path, die: str | None = None) -> subprocess.CompletedProcess:
    return _rlf(["train", *CASES[case], *COMMON, "--run-dir", str(run)], run.parent, die)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run of each case, trained once for the module."""
    runs: dict[str, Path] = {}

    def get(case: str) -> Path:
        if case not in runs:
            run = tmp_path_factory.mktemp(f"ref-{case}") / "run"
            done = _train(case, run)
            assert done.returncode == 0, done.stderr
            runs[case] = run
        return runs[case]

    return get


def _table(path: Path) -> list[list[str]]:
    """The CSV's rows with the time-dependent columns taken out (everything else as written)."""
    rows = list(csv.reader(io.StringIO(path.read_text())))
    if not rows:  # a run too short for an episode (or a metrics row) leaves the file empty
        return []
    keep = [i for i, name in enumerate(rows[0]) if name not in TIME_COLUMNS]
    return [[row[i] for i in keep] for row in rows]


def assert_same_tree(a, b, where: str = "state") -> None:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        assert np.array_equal(a, b), f"{where}: arrays differ"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), f"{where}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_same_tree(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_tree(x, y, f"{where}[{i}]")
    else:
        assert type(a) is type(b) and a == b, f"{where}: {a!r} != {b!r}"


def _final_state(run: Path) -> dict:
    state = ckpt.load(run / "checkpoint.rlf")
    state.pop("saved_at")
    state["config"]["run"].pop("run_dir")
    return state


def assert_identical_runs(reference: Path, run: Path) -> None:
    expected, got = _final_state(reference), _final_state(run)
    assert got["counters"]["env_steps"] == 640
    assert "envs" in got["strategy"]["inflight"], got["strategy"]["inflight"]
    assert_same_tree(expected, got)  # weights, optimizer state, replay, RNGs, env states, counters
    for name in ("metrics.csv", "episodes.csv"):
        assert _table(run / name) == _table(reference / name), f"{name} differs from the uninterrupted run's"


@pytest.mark.parametrize("kill", sorted(KILLS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_killed_and_resumed_run_is_bit_identical(case, kill, reference, tmp_path):
    run = tmp_path / "run"
    killed = _train(case, run, die=KILLS[kill])
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    state = ckpt.load(run / "checkpoint.rlf")
    assert state["counters"]["env_steps"] == 192
    # rows past the checkpoint were written, and are cut on resume
    if kill == "between-checkpoints":
        table = _table(run / "metrics.csv")
        steps = [int(row[table[0].index("env_step")]) for row in table[1:]]
        assert max(steps) > 192, steps
    resumed = _rlf(["train", "--resume", str(run), "--no-progress"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resume: starting fresh episodes" not in resumed.stderr
    assert_identical_runs(reference(case), run)


def test_env_without_the_protocol_resumes_with_fresh_episodes_and_says_so(tmp_path):
    """FrozenLake (toy text) has neither get_state/set_state nor an adapter: today's behaviour, one line."""
    run = tmp_path / "run"
    args = ["train", "ppo", "--env", "gym:FrozenLake-v1", "--steps", "384", "--seed", "5", "--no-progress",
            "--set", "vector=sync", "--set", "num_envs=2", "--set", "algo.rollout_steps=32", "--set", "algo.hidden_sizes=[8]",
            "--set", "log_interval=64", "--set", "checkpoint_interval=128", "--set", "loggers=['csv']",
            "--run-dir", str(run)]
    killed = _rlf(args, tmp_path, die="checkpoint:1")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    saved = ckpt.load(run / "checkpoint.rlf")["strategy"]
    assert "FrozenLakeEnv has no get_state/set_state" in saved["inflight"]["unavailable"], saved["inflight"]
    resumed = _rlf(["train", "--resume", str(run), "--no-progress"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    notes = [line for line in resumed.stderr.splitlines() if line.startswith("resume:")]
    assert len(notes) == 1 and "starting fresh episodes" in notes[0] and "FrozenLakeEnv" in notes[0], resumed.stderr
    assert "Traceback" not in resumed.stderr
    final = ckpt.load(run / "checkpoint.rlf")
    assert final["counters"]["env_steps"] == 384
    assert final["strategy"]["resets"] == saved["resets"] + 1  # the envs were reset: fresh episodes


def test_subprocess_envs_resume_exactly_too(tmp_path):
    """vector=async: each env worker answers rlf's state command, so the checkpoint holds its episode too."""
    args = ["train", *CASES["ppo"], *["vector=async" if part == "vector=sync" else part for part in COMMON]]
    reference, run = tmp_path / "ref", tmp_path / "run"
    done = _rlf([*args, "--run-dir", str(reference)], tmp_path)
    assert done.returncode == 0, done.stderr
    killed = _rlf([*args, "--run-dir", str(run)], tmp_path, die="step:300")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = _rlf(["train", "--resume", str(run), "--no-progress"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resume: starting fresh episodes" not in resumed.stderr
    assert_identical_runs(reference, run)


# -- the adapters on their own: each classic-control env, through a real checkpoint file ----------------

CLASSIC_CONTROL = ["CartPole-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1", "Pendulum-v1"]


@pytest.mark.parametrize("env_id", CLASSIC_CONTROL)
def test_classic_control_state_survives_a_checkpoint_file(env_id, tmp_path):
    import gymnasium

    from rlf.envs.state import get_env_state, set_env_state

    original = gymnasium.make(env_id, max_episode_steps=60)  # short: episode ends and resets are crossed too
    original.reset(seed=11)
    actions = np.random.default_rng(0)
    sample = (lambda: int(actions.integers(original.action_space.n))) if hasattr(original.action_space, "n") \
        else (lambda: actions.uniform(-1, 1, size=original.action_space.shape).astype(np.float32))
    for _ in range(137):
        if any(original.step(sample())[2:4]):
            original.reset()
    ckpt.save(tmp_path / "state.rlf", {"env": get_env_state(original)})
    copy = gymnasium.make(env_id, max_episode_steps=60)  # fresh, never reset: the state makes it usable
    set_env_state(copy, ckpt.load(tmp_path / "state.rlf")["env"])
    for step in range(300):
        action = sample()
        a, b = original.step(action), copy.step(action)
        assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4], f"{env_id} diverged at step {step}"
        if a[2] or a[3]:
            assert np.array_equal(original.reset()[0], copy.reset()[0])


def test_a_wrapper_without_an_adapter_is_named():
    import gymnasium

    from rlf.envs.state import StateUnavailable, get_env_state

    env = gymnasium.wrappers.ClipReward(gymnasium.make("CartPole-v1"), -1, 1)
    with pytest.raises(StateUnavailable, match="ClipReward has no get_state/set_state"):
        get_env_state(env)


def test_a_state_for_another_env_is_refused_before_anything_changes():
    import gymnasium

    from rlf.envs.state import StateUnavailable, get_env_state, set_env_states

    cartpole, pendulum = gymnasium.make("CartPole-v1"), gymnasium.make("Pendulum-v1")
    cartpole.reset(seed=1)
    pendulum.reset(seed=2)
    fresh = gymnasium.make("Pendulum-v1")
    with pytest.raises(StateUnavailable, match="CartPoleEnv"):
        set_env_states([fresh, gymnasium.make("Pendulum-v1")], [get_env_state(pendulum), get_env_state(cartpole)])
    assert getattr(fresh.unwrapped, "state", None) is None  # the first env was not touched either



# -- env worker processes (vector=async) answer for their envs ----------------------------------------------

def _cartpole():
    import gymnasium

    return gymnasium.make("CartPole-v1", max_episode_steps=30)  # short: episode ends are crossed too


def test_env_workers_say_and_take_their_envs_state_in_the_in_process_format(tmp_path):
    from rlf.envs.gym_vector import GymVector

    actions = np.random.default_rng(0).integers(2, size=(120, 2))
    original = GymVector("cartpole", _cartpole, 2, subprocess=True)
    copies = [GymVector("cartpole", _cartpole, 2, subprocess=True), GymVector("cartpole", _cartpole, 2, subprocess=False)]
    try:
        original.reset(seed=11)
        for action in actions[:50]:
            original.step({"agent": action})
        ckpt.save(tmp_path / "state.rlf", {"vector": original.get_state()})
        for copy in copies:  # never reset: the state makes them usable, in workers or in this process
            copy.set_state(ckpt.load(tmp_path / "state.rlf")["vector"])
        for t, action in enumerate(actions[50:]):
            expected = original.step({"agent": action})
            for copy in copies:
                got = copy.step({"agent": action})
                assert np.array_equal(got.obs["agent"], expected.obs["agent"]), f"diverged at step {t}"
                assert np.array_equal(got.rewards["agent"], expected.rewards["agent"])
                assert np.array_equal(got.episode_ended, expected.episode_ended)
    finally:
        for vector in (original, *copies):
            vector.close()


def test_env_workers_without_the_protocol_or_mid_step_say_why():
    import gymnasium

    from rlf.envs.gym_vector import GymVector
    from rlf.envs.state import StateUnavailable

    frozen = GymVector("frozen", lambda: gymnasium.make("FrozenLake-v1"), 2, subprocess=True)
    try:
        frozen.reset(seed=1)
        with pytest.raises(StateUnavailable, match="FrozenLakeEnv has no get_state/set_state"):
            frozen.get_state()
        frozen.step({"agent": np.array([0, 1])})  # the workers still step after answering
    finally:
        frozen.close()
    cartpole = GymVector("cartpole", _cartpole, 2, subprocess=True)
    try:
        cartpole.reset(seed=1)
        cartpole.step_async(0, {"agent": np.array([0])})
        with pytest.raises(StateUnavailable, match="in the middle of a step"):
            cartpole.get_state()
    finally:
        cartpole.close()

"""Exact resume after a stop signal: a run stopped with SIGTERM or Ctrl-C (SIGINT), wherever in a rollout,
a chunk or an update the signal lands, and resumed ends bit-identical to one never stopped (weights,
optimizer, replay, RNGs, env states, counters; metrics.csv and episodes.csv less the clock's column).

The signal is the real one, sent by the run to itself at a chosen vector step (``EpisodeTracker.update``,
called once per step of every env) or at the start of a chosen update (``learn()``), so the moment is
exact and no timing can make a test flaky; one test sends it from outside to a real ``rlf train``
waiting at a chosen step. Every test puts the dispositions it relies on in place and restores them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_exact_resume import _table, assert_same_tree

import rlf
import rlf.training.startup as startup
from rlf import hookimpl
from rlf.envs.collectors import build_sync_collector
from rlf.plugins import load_registry
from rlf.storage import checkpoint as ckpt
from rlf.training.actors import ActorWorker
from rlf.training.episodes import EpisodeTracker
from rlf.training.trainer import Interrupted, sigterm_as_interrupt

STEPS = 320
# 2 envs: a PPO rollout is 32 vector steps (64 env steps), an off-policy chunk 32 vector steps; log_interval
# divides neither, so the resumed run must continue the row schedule and the metrics averaged since the last row
COMMON = [f"steps={STEPS}", "seed=5", "progress=false", "num_envs=2", "log_interval=100", "checkpoint_interval=0",
          "loggers=['csv']"]
PPO = ["algo.rollout_steps=32", "algo.minibatches=2", "algo.epochs=2", "algo.hidden_sizes=[16]"]
DQN = ["algo.min_replay_size=64", "algo.batch_size=16", "algo.hidden_sizes=[16]", "algo.target_update_interval=100"]
CASES = {
    "ppo-sync": ("ppo", "gym:CartPole-v1", [*PPO, "vector='sync'"]),
    "ppo-async": ("ppo", "gym:CartPole-v1", [*PPO, "vector='async'"]),
    "ppo-overlap": ("ppo", "gym:CartPole-v1", [*PPO, "vector='sync'", "algo.overlap_update=true"]),
    # a recurrent policy: the interrupted rollout's stored states and every env's memory
    "ppo-lstm-sync": ("ppo", "gym:rlf.envs.cartpole_positions:CartPolePositions-v1",
                      [*PPO, "vector='sync'", "algo.memory='lstm'", "algo.memory_size=8", "algo.sequence_length=8"]),
    "dqn-sync": ("dqn", "gym:CartPole-v1", [*DQN, "vector='sync'"]),
    "dqn-async": ("dqn", "gym:CartPole-v1", [*DQN, "vector='async'"]),
    "sac": ("sac", "gym:Pendulum-v1", ["vector='sync'", "algo.learning_starts=64", "algo.batch_size=16",
                                       "algo.hidden_sizes=[16]", "env.max_episode_steps=50"]),
    "iql": ("iql", "predator-prey", ["vector='sync'"]),
    # Dict observations (an image and a vector): in-flight observations, replay and env state hold both parts
    "dqn-dict-sync": ("dqn", "gym:rlf.envs.goal_cells:GoalCells-v0", [*DQN, "vector='sync'"]),
    "dqn-dict-async": ("dqn", "gym:rlf.envs.goal_cells:GoalCells-v0", [*DQN, "vector='async'"]),
    # on-policy rollouts of Dict observations (the tests' numpy linear policy: no on-policy plugin reads them yet)
    "parts-sync": ("linear-pg-parts", "gym:rlf.envs.goal_cells:GoalCells-v0", [*PPO[:1], "vector='sync'"]),
    "parts-async": ("linear-pg-parts", "gym:rlf.envs.goal_cells:GoalCells-v0", [*PPO[:1], "vector='async'"]),
}
TEST_PLUGIN_ALGORITHMS = {"linear-pg-parts"}
"""Registered by the tests' own plugin (tests/support.py), not by an installed one."""
# (where, n): the signal at the n-th vector step ("step") or at the start of the n-th update ("learn").
# PPO: step 45 is mid-way through the second rollout, update 3 the third rollout's; off-policy: step 45 is
# mid-way through the second chunk, update 100 (one per step once the replay has 64) inside the fourth.
MOMENTS = {"mid-rollout": ("step", 45), "mid-update": ("learn", 3)}
OFF_POLICY_MOMENTS = {"mid-chunk": ("step", 45), "mid-update": ("learn", 100)}
SIGNALS = {"sigterm": signal.SIGTERM, "sigint": signal.SIGINT}


def _registry_for(algorithm: str, registry=None):
    if registry is None and algorithm in TEST_PLUGIN_ALGORITHMS:
        from support import TestPlugin

        return load_registry(extra_plugins=[("test-plugin", TestPlugin())])
    return registry


def _make(case: str, run: Path, registry=None):
    algorithm, env, extra = CASES[case]
    return rlf.make(algorithm, env, registry=_registry_for(algorithm, registry),
                    overrides=[*COMMON, *extra, f"run_dir='{run}'"])


@contextlib.contextmanager
def _dispositions():
    """SIGTERM as ``rlf train`` sets it, and Python's own SIGINT handler (a test run started in the background
    or under nohup inherits SIGINT ignored, which rlf rightly leaves ignored); both restored after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with sigterm_as_interrupt():
            yield
    finally:
        signal.signal(signal.SIGINT, before)


@contextlib.contextmanager
def _signal_at(monkeypatch, where: str, n: int, signum: int):
    """Send ``signum`` to this process at the n-th vector step or at the start of the n-th update."""
    count = [0]

    def tick() -> None:
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signum)

    if where == "step":
        update = EpisodeTracker.update

        def counting_update(self, *args, **kwargs):
            rows = update(self, *args, **kwargs)
            tick()
            return rows

        monkeypatch.setattr(EpisodeTracker, "update", counting_update)
    else:
        # every strategy's learn() goes through startup.learn_call, which calls startup's plugin_call
        real = startup.plugin_call

        def counting_call(algorithm, what, *args, **kwargs):
            if what == "learn()":
                tick()
            return real(algorithm, what, *args, **kwargs)

        monkeypatch.setattr(startup, "plugin_call", counting_call)
    try:
        yield count
    finally:
        monkeypatch.undo()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run of each case, trained once for the module."""
    runs: dict[str, Path] = {}

    def get(case: str) -> Path:
        if case not in runs:
            run = tmp_path_factory.mktemp(f"ref-{case}") / "run"
            _make(case, run).train()
            runs[case] = run
        return runs[case]

    return get


def _final_state(run: Path) -> dict:
    state = ckpt.load(run / "checkpoint.rlf")
    state.pop("saved_at")
    state["config"]["run"].pop("run_dir")
    return state


def assert_identical_runs(reference: Path, run: Path) -> None:
    expected, got = _final_state(reference), _final_state(run)
    assert got["counters"]["env_steps"] == STEPS
    assert "envs" in got["strategy"]["inflight"], got["strategy"]["inflight"]
    assert_same_tree(expected, got)
    for name in ("metrics.csv", "episodes.csv"):
        assert _table(run / name) == _table(reference / name), f"{name} differs from the uninterrupted run's"


def _stop_and_resume(case: str, run: Path, moment: tuple[str, int], signum: int, monkeypatch, capfd) -> dict:
    """Train until the signal stops the run, then resume it to the end; returns the stop's checkpoint."""
    algo = _make(case, run)
    with _dispositions(), _signal_at(monkeypatch, *moment, signum) as count:
        with pytest.raises(Interrupted, match=r"^interrupted at env step \d+; checkpoint saved, continue with"):
            algo.train()
    assert count[0] >= moment[1]
    stopped = ckpt.load(run / "checkpoint.rlf")
    assert 0 < stopped["counters"]["env_steps"] < STEPS
    rlf.load(run, registry=_registry_for(CASES[case][0])).train()
    assert "resume: starting fresh episodes" not in capfd.readouterr().err
    return stopped


@pytest.mark.parametrize("signame", sorted(SIGNALS))
@pytest.mark.parametrize("moment", sorted(MOMENTS))
@pytest.mark.parametrize("case", ["ppo-sync", "ppo-async"])
def test_on_policy_stopped_and_resumed_is_bit_identical(case, moment, signame, reference, tmp_path, monkeypatch,
                                                          capfd):
    stopped = _stop_and_resume(case, tmp_path / "run", MOMENTS[moment], SIGNALS[signame], monkeypatch, capfd)
    if moment == "mid-rollout":
        # the stop did not wait for the rollout's end: the steps it had taken are in the checkpoint (the
        # 13th rollout step's; with async envs the next step was under way, and is finished first)
        assert stopped["counters"]["env_steps"] == 64
        taken = len(stopped["strategy"]["partial"]["buffers"]["rewards"]["agent"])
        assert taken == (14 if case == "ppo-async" else 13)
    else:  # the update under way finished first: the checkpoint is the one after it
        assert stopped["counters"]["env_steps"] == 192 and "partial" not in stopped["strategy"]
    assert_identical_runs(reference(case), tmp_path / "run")


@pytest.mark.parametrize("signame", sorted(SIGNALS))
@pytest.mark.parametrize("moment", sorted(OFF_POLICY_MOMENTS))
@pytest.mark.parametrize("case", ["dqn-sync", "dqn-async"])
def test_off_policy_stopped_and_resumed_is_bit_identical(case, moment, signame, reference, tmp_path, monkeypatch,
                                                           capfd):
    stopped = _stop_and_resume(case, tmp_path / "run", OFF_POLICY_MOMENTS[moment], SIGNALS[signame], monkeypatch,
                               capfd)
    # the chunk under way finished first (64 env steps at most)
    assert stopped["counters"]["env_steps"] == (128 if moment == "mid-chunk" else 256)
    assert_identical_runs(reference(case), tmp_path / "run")


@pytest.mark.parametrize(("case", "moment", "signame"), [
    ("dqn-dict-sync", "mid-chunk", "sigterm"), ("dqn-dict-sync", "mid-update", "sigint"),
    ("dqn-dict-async", "mid-chunk", "sigint"), ("dqn-dict-async", "mid-update", "sigterm")])
def test_dict_observations_stopped_and_resumed_are_bit_identical(case, moment, signame, reference, tmp_path,
                                                                 monkeypatch, capfd):
    stopped = _stop_and_resume(case, tmp_path / "run", OFF_POLICY_MOMENTS[moment], SIGNALS[signame], monkeypatch,
                               capfd)
    saved = stopped["strategy"]["inflight"]["obs"]["agent"]
    assert saved["image"].dtype == np.uint8 and saved["image"].shape == (2, 16, 16, 1)
    assert saved["vector"].shape == (2, 4)
    assert_identical_runs(reference(case), tmp_path / "run")


@pytest.mark.parametrize(("case", "signame"), [("parts-sync", "sigterm"), ("parts-async", "sigint")])
def test_a_rollout_of_dict_observations_stopped_mid_way_resumes_bit_identical(case, signame, reference, tmp_path,
                                                                              monkeypatch, capfd):
    stopped = _stop_and_resume(case, tmp_path / "run", MOMENTS["mid-rollout"], SIGNALS[signame], monkeypatch, capfd)
    partial = stopped["strategy"]["partial"]["buffers"]
    taken = len(partial["rewards"]["agent"])
    assert partial["obs"]["agent"]["image"].shape == (taken, 2, 16, 16, 1)
    assert partial["obs"]["agent"]["image"].dtype == np.uint8
    assert partial["next_obs"]["agent"]["vector"].shape == (taken, 2, 4)
    assert_identical_runs(reference(case), tmp_path / "run")


@pytest.mark.parametrize(("case", "moment", "signame"), [
    ("ppo-overlap", "mid-rollout", "sigterm"), ("ppo-overlap", "mid-update", "sigint"),
    ("ppo-lstm-sync", "mid-rollout", "sigint"), ("ppo-lstm-sync", "mid-update", "sigterm"),
    ("sac", "mid-chunk", "sigint"), ("sac", "mid-update", "sigterm"),
    ("iql", "mid-chunk", "sigterm"), ("iql", "mid-update", "sigint")])
def test_other_strategies_stopped_and_resumed_are_bit_identical(case, moment, signame, reference, tmp_path,
                                                                  monkeypatch, capfd):
    moments = MOMENTS if case.startswith("ppo") else OFF_POLICY_MOMENTS
    _stop_and_resume(case, tmp_path / "run", moments[moment], SIGNALS[signame], monkeypatch, capfd)
    assert_identical_runs(reference(case), tmp_path / "run")


def test_a_stop_while_a_rollout_waits_for_its_update_keeps_it(reference, tmp_path, monkeypatch, capfd):
    """overlap_update: the checkpoint holds the rollout collected beside the last update, unlearned, as
    the run never stopped would learn it next."""
    stopped = _stop_and_resume("ppo-overlap", tmp_path / "run", ("learn", 2), signal.SIGTERM, monkeypatch, capfd)
    assert "ahead" in stopped["strategy"] and stopped["strategy"]["learner"]["updates"] == 2
    assert_identical_runs(reference("ppo-overlap"), tmp_path / "run")


# -- actor-learner (APPO): actors step their own envs, so a resume starts fresh episodes -----------------

class _InProcessPool:
    """An ``ActorPool`` with every actor in this process, in turn: an APPO run that repeats exactly."""

    def __init__(self, job, config=None):
        self.workers = [ActorWorker(job, seed) for seed in job.seeds]
        for worker in self.workers:
            worker.load(job.weights)
        self.turn, self.restarts = 0, 0

    def push(self, weights):
        for worker in self.workers:
            worker.load(weights)

    def collect(self):
        index, self.turn = self.turn, (self.turn + 1) % len(self.workers)
        return index, self.workers[index].chunk()

    def close(self):
        for worker in self.workers:
            worker.close()


class _InProcessActors:
    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_collectors(self, register):
        register("in-process-actors", build_collector=build_sync_collector, build_actor_pool=_InProcessPool,
                 description="tests: actors in this process, in turn")


APPO = ["vector='in-process-actors'", "algo.actors=2", "algo.rollout_steps=16", "algo.hidden_sizes=[16]"]


def _appo(run: Path, steps: int, registry):
    return rlf.make("appo", "gym:CartPole-v1", registry=registry,
                    overrides=[*[o for o in COMMON if not o.startswith("steps=")], f"steps={steps}", *APPO,
                               f"run_dir='{run}'"])


def test_appo_stops_at_a_chunk_boundary_and_resumes_with_fresh_episodes(tmp_path, monkeypatch, capfd):
    registry = load_registry(extra_plugins=[("in-process-actors", _InProcessActors())])
    algo = _appo(tmp_path / "run", STEPS, registry)
    with _dispositions(), _signal_at(monkeypatch, "step", 45, signal.SIGTERM):
        with pytest.raises(Interrupted):
            algo.train()
    stopped = ckpt.load(tmp_path / "run" / "checkpoint.rlf")
    at = stopped["counters"]["env_steps"]
    assert at == 48  # chunks of 16 steps of one env: the signal at the 45th came in the third
    # the checkpoint is the state a run that ended at that step has: no update was cut short
    ended = _appo(tmp_path / "ended", at, registry)
    ended.train()
    assert_same_tree(ckpt.load(tmp_path / "ended" / "checkpoint.rlf")["strategy"]["learner"],
                     stopped["strategy"]["learner"])
    assert _table(tmp_path / "ended" / "episodes.csv") == _table(tmp_path / "run" / "episodes.csv")
    capfd.readouterr()
    rlf.load(tmp_path / "run", registry=registry).train()
    notes = [line for line in capfd.readouterr().err.splitlines() if line.startswith("resume:")]
    assert len(notes) == 1 and "starting fresh episodes" in notes[0], notes
    table = _table(tmp_path / "run" / "episodes.csv")
    episodes = [float(row[table[0].index("episode")]) for row in table[1:]]
    assert episodes == list(range(1, len(episodes) + 1))  # each episode once, none missing


# -- the real command, stopped from outside -------------------------------------------------------------

# Waits at a chosen vector step (inside a rollout) until the parent's signal has arrived: the signal is sent
# from another process, and the moment is still exact.
CHILD = r"""
import os, sys, time
wait_at = int(os.environ.get("RLF_TEST_WAIT_AT", "0"))
if wait_at:
    from rlf.training import signals
    from rlf.training.episodes import EpisodeTracker
    update, count = EpisodeTracker.update, [0]
    def waiting_update(self, *args, **kwargs):
        rows = update(self, *args, **kwargs)
        count[0] += 1
        if count[0] == wait_at:
            open(os.environ["RLF_TEST_MARK"], "w").close()
            deadline = time.monotonic() + 120
            while not signals.stop_pending() and time.monotonic() < deadline:
                time.sleep(0.05)
        return rows
    EpisodeTracker.update = waiting_update
from rlf.cli.commands import main
sys.exit(main(sys.argv[1:]))
"""


def _default_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def _cli(args: list[str], cwd: Path, wait_at: int = 0) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RLF_TEST_WAIT_AT": str(wait_at),
           "RLF_TEST_MARK": str(cwd / "waiting")}
    env.pop("RLF_STRICT_PLUGINS", None)
    # a session of its own: the terminal's Ctrl-C goes to its whole process group, env workers included
    return subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_signals, start_new_session=True)


@pytest.mark.parametrize(("signame", "case"), [("sigterm", "ppo-sync"), ("sigint", "ppo-async")])
def test_rlf_train_stopped_from_outside_mid_rollout_resumes_bit_identical(signame, case, tmp_path):
    """SIGTERM as `kill PID` sends it (to the training process), SIGINT as a terminal's Ctrl-C does (to the
    process group: the env workers get it too, and must not die of it before the run has stopped)."""
    args = ["train", "ppo", "--env", "gym:CartPole-v1", "--steps", str(STEPS), "--seed", "5", "--no-progress",
            *[part for o in [*COMMON[3:], *CASES[case][2]] for part in ("--set", o)]]
    reference = _cli([*args, "--run-dir", str(tmp_path / "ref")], tmp_path)
    stopped = _cli([*args, "--run-dir", str(tmp_path / "run")], tmp_path, wait_at=45)
    try:
        deadline = time.monotonic() + 600
        while not (tmp_path / "waiting").exists():
            assert stopped.poll() is None and time.monotonic() < deadline, stopped.stderr.read()
            time.sleep(0.1)
        if signame == "sigint":
            os.killpg(stopped.pid, signal.SIGINT)
        else:
            stopped.send_signal(signal.SIGTERM)
        _, err = stopped.communicate(timeout=600)
    finally:
        if stopped.poll() is None:
            stopped.kill()
    assert stopped.returncode == 130, err
    lines = [line for line in err.splitlines() if line.startswith("rlf:")]
    assert len(lines) == 1 and "interrupted at env step 64; checkpoint saved, continue with" in lines[0], err
    assert "Traceback" not in err
    resumed = _cli(["train", "--resume", str(tmp_path / "run"), "--no-progress"], tmp_path)
    _, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0 and "starting fresh episodes" not in err, err
    _, err = reference.communicate(timeout=600)
    assert reference.returncode == 0, err
    assert_identical_runs(tmp_path / "ref", tmp_path / "run")

"""A run's start-up with subprocess envs (what makes `rlf train ppo --env mario` reach its first env
step in seconds, benchmarks/mario_startup.py): the main process builds the env once (the check's
probe), every worker group starts at once, and the agent and learner are built while the workers
start. Same results, same errors as building everything one after the other."""

from __future__ import annotations

import dataclasses
import os
import pickle
import threading
import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import rlf
from rlf import SINGLE_AGENT
from rlf.envs import EnvFactory, GymVector, make_vector_env
from rlf.errors import EnvWorkerError


@dataclasses.dataclass(frozen=True)
class Counted:
    """Config of ``counted_cartpole``: where each build appends its pid, how long a worker build takes."""

    log: str
    worker_delay: float = 0.0
    parent: int = 0
    fail_in_worker: bool = False


def counted_cartpole(config: Counted):
    with open(config.log, "a") as handle:
        handle.write(f"{os.getpid()}\n")
    if os.getpid() != config.parent:
        if config.fail_in_worker:
            os._exit(3)
        time.sleep(config.worker_delay)
    return gymnasium.make("CartPole-v1")


def builds(log: Path) -> tuple[int, int]:
    """(builds in this process, builds in other processes)."""
    pids = log.read_text().split() if log.exists() else []
    here = pids.count(str(os.getpid()))
    return here, len(pids) - here


def make(registry, tmp_path, *overrides):
    return rlf.make("linear-pg", "gym:CartPole-v1", registry=registry, overrides=[
        "progress=false", f"run_dir='{tmp_path / 'run'}'", "vector='async'", "num_envs=4", "steps=64",
        "algo.rollout_steps=8", "checkpoint_interval=0", *overrides])


def test_a_run_builds_its_env_once_in_the_main_process(registry, tmp_path):
    log = tmp_path / "builds"
    algo = make(registry, tmp_path)
    algo.factory = EnvFactory(counted_cartpole, Counted(str(log), parent=os.getpid()))
    algo.check()  # the CLI checks, then train() checks again: still the one probe
    algo.train()
    assert builds(log) == (1, 4)  # before: 5 here (check twice, the vector env, each group's dummy env)
    assert algo.counters["env_steps"] == 64


def test_the_probe_is_not_pickled_to_workers_and_describes_like_a_built_env(tmp_path):
    factory = EnvFactory(counted_cartpole, Counted(str(tmp_path / "builds"), parent=os.getpid()))
    spec = factory.describe("gym:CartPole-v1", 6)
    assert factory.describe("gym:CartPole-v1", 6) == spec and builds(tmp_path / "builds") == (1, 0)
    assert spec.num_envs == 6 and spec.name == "gym:CartPole-v1" and not spec.multi_agent
    assert spec.observation_spaces[SINGLE_AGENT] == gymnasium.make("CartPole-v1").observation_space
    copy = pickle.loads(pickle.dumps(factory))
    assert copy._probe is None and copy == factory


def test_subprocess_vector_from_a_cached_probe_steps_like_in_process_envs(tmp_path):
    factory = EnvFactory(counted_cartpole, Counted(str(tmp_path / "builds"), parent=os.getpid()))
    workers = make_vector_env("gym:CartPole-v1", factory, 3, subprocess=True)
    local = GymVector("gym:CartPole-v1", EnvFactory(counted_cartpole, factory.config), 3, subprocess=False)
    try:
        assert workers.spec == local.spec
        assert workers.groups[0].metadata["render_fps"] == gymnasium.make("CartPole-v1").metadata["render_fps"]
        np.testing.assert_array_equal(workers.reset(seed=3)[SINGLE_AGENT], local.reset(seed=3)[SINGLE_AGENT])
        rng = np.random.default_rng(1)
        for _ in range(40):
            actions = {SINGLE_AGENT: rng.integers(0, 2, size=3)}
            np.testing.assert_array_equal(workers.step(actions).obs[SINGLE_AGENT], local.step(actions).obs[SINGLE_AGENT])
    finally:
        workers.close()
        local.close()


def test_agent_and_learner_are_built_while_the_workers_start(registry, tmp_path):
    seen: dict[str, object] = {}
    algo = make(registry, tmp_path)
    algo.factory = EnvFactory(counted_cartpole, Counted(str(tmp_path / "builds"), worker_delay=1.5,
                                                        parent=os.getpid()))
    spec = algo.resolved.algorithm

    def build_agent(context):
        seen["thread"] = threading.current_thread().name
        seen["agent_at"] = time.monotonic()
        return spec.build_agent(context)

    original_init = GymVector.__init__

    def timed_init(self, *args, **kwargs):
        seen["workers_from"] = time.monotonic()
        original_init(self, *args, **kwargs)
        seen["workers_to"] = time.monotonic()

    algo.resolved.algorithm = dataclasses.replace(spec, build_agent=build_agent)
    GymVector.__init__ = timed_init
    try:
        algo.train()
    finally:
        GymVector.__init__ = original_init
    assert seen["thread"] == "rlf-build-agent"
    assert seen["agent_at"] < seen["workers_to"]  # the workers take >= 1.5 s to build their envs
    assert algo.counters["env_steps"] == 64


def test_same_weights_as_a_run_with_in_process_envs(registry, tmp_path):
    weights = []
    for vector in ("sync", "async"):
        algo = make(registry, tmp_path / vector, f"vector='{vector}'", "seed=4")
        algo.train()
        weights.append(algo.strategy.agent.params[SINGLE_AGENT])
    for name in ("pi", "v"):
        np.testing.assert_array_equal(weights[0][name], weights[1][name])


def test_a_builder_error_is_raised_as_is_and_the_workers_are_closed(registry, tmp_path):
    algo = make(registry, tmp_path)
    spec = algo.resolved.algorithm

    def broken(context, agent):
        raise rlf.ConfigError("algo.lr does not suit this env; lower it")

    algo.resolved.algorithm = dataclasses.replace(spec, build_learner=broken)
    with pytest.raises(rlf.ConfigError, match="lower it"):
        algo.train()
    assert algo.strategy.envs is None  # torn down: no worker left behind


def test_a_worker_that_fails_to_start_is_still_reported(registry, tmp_path):
    algo = make(registry, tmp_path)
    algo.factory = EnvFactory(counted_cartpole, Counted(str(tmp_path / "builds"), parent=os.getpid(),
                                                        fail_in_worker=True))
    with pytest.raises(EnvWorkerError, match="died while starting"):
        algo.train()
    assert [t.name for t in threading.enumerate() if t.name == "rlf-build-agent"] == []


def templated_cartpole(config: Counted):
    return counted_cartpole(config)


templated_cartpole.fork_template = True

TEMPLATE_SCRIPT = """
import json, multiprocessing.forkserver, os, sys
import numpy as np
from test_startup import Counted, templated_cartpole
from rlf import SINGLE_AGENT
from rlf.envs import EnvFactory, GymVector

factory = EnvFactory(templated_cartpole, Counted(sys.argv[1], parent=os.getpid()))
workers = GymVector("gym:CartPole-v1", factory, 4, subprocess=True)
local = GymVector("gym:CartPole-v1", EnvFactory(templated_cartpole, Counted(sys.argv[2])), 4, subprocess=False)
same = bool(np.array_equal(workers.reset(seed=9)[SINGLE_AGENT], local.reset(seed=9)[SINGLE_AGENT]))
rng = np.random.default_rng(2)
for _ in range(60):  # episodes end and autoreset within 60 random steps
    actions = {SINGLE_AGENT: rng.integers(0, 2, size=4)}
    same = same and bool(np.array_equal(workers.step(actions).obs[SINGLE_AGENT], local.step(actions).obs[SINGLE_AGENT]))
print(json.dumps({"same": same, "main": os.getpid(), "server": multiprocessing.forkserver._forkserver._forkserver_pid,
                  "workers": [p.pid for g in workers.groups for p in g.processes]}))
workers.close()
"""


def test_workers_of_a_templated_env_start_from_the_fork_servers_copy(tmp_path):
    import json
    import subprocess
    import sys

    log = tmp_path / "builds"
    here = Path(__file__).parent
    done = subprocess.run([sys.executable, "-c", TEMPLATE_SCRIPT, str(log), str(tmp_path / "local")],
                          capture_output=True, text=True, cwd=here, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parent),
                                                                            os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    pids = [int(pid) for pid in log.read_text().split()]
    # the probe in the main process, the template in the fork server, nothing in the 4 workers
    assert sorted(pids) == sorted([result["main"], result["server"]]), (pids, result)
    assert result["same"]  # and they step exactly as freshly built envs do


def test_the_first_steps_do_not_wait_for_the_learner_and_a_fork_waits_for_it(registry, tmp_path):
    import multiprocessing

    from rlf.training.startup import BackgroundBuild

    spec = registry.algorithm("linear-pg")
    seen: dict[str, float] = {}
    stepped = threading.Event()

    def slow_learner(context, agent):
        stepped.wait(timeout=30)  # were the envs stepped only once the learner exists, this times out
        seen["learner_done"] = time.monotonic()
        return spec.build_learner(context, agent)

    original_wait = GymVector.step_wait

    def step_wait(self, part):
        seen.setdefault("first_step", time.monotonic())
        stepped.set()
        return original_wait(self, part)

    algo = make(registry, tmp_path)
    algo.resolved.algorithm = dataclasses.replace(spec, build_learner=slow_learner)
    GymVector.step_wait = step_wait
    try:
        algo.train()
    finally:
        GymVector.step_wait = original_wait
    assert seen["first_step"] < seen["learner_done"] and algo.counters["env_steps"] == 64

    # a fork while the learner is still being built copies a finished build (os.register_at_fork)
    stepped.clear()
    threading.Timer(1.0, stepped.set).start()
    build = BackgroundBuild(dataclasses.replace(spec, build_learner=slow_learner), algo.strategy.context)
    build.agent()
    child = multiprocessing.get_context("fork").Process(target=_exit_built, args=(build,))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert build.learner() is not None


def _exit_built(build) -> None:
    os._exit(0 if build.built_learner is not None else 1)

"""The ``async-workers`` strategy (A3C's worker processes), driven by a numpy test learner.

The test learner does not share a model between processes, so these tests check the machinery
itself: workers run and report, the budget is exact, a failing worker becomes a clear error, and
teardown leaves no process behind. The strategy is registered by this plugin's entry point; the
algorithm here is registered in-test, as a third-party algorithm on this family would be.
"""

import csv
import multiprocessing as mp
import os
import time

import numpy as np
import pytest
from pydantic import Field
from rlf_plugin_a3c.config import AsyncWorkersConfig

import rlf
from rlf import Acting, Agent, Learner, hookimpl
from rlf.errors import EnvWorkerError

_FORK = mp.get_context("fork")
LEARNED_STEPS = _FORK.Value("q", 0)
"""Env steps learned from, summed over every worker process."""
FAILED = _FORK.Value("b", 0)
WORKER_SEEDS = _FORK.Queue()


class CountingConfig(AsyncWorkersConfig):
    """A learner that counts what it learns from, plus ways to make one worker fail."""

    fail_after: int = Field(0, ge=0, description="Learn calls (all workers) after which one worker fails; 0 = never.")
    hard_exit: bool = Field(False, description="Fail by exiting the process instead of raising.")


class UniformAgent(Agent):
    """Uniform random actions and a zero critic: enough for rollouts, GAE and episodes."""

    def __init__(self, context):
        self.rng = np.random.default_rng(context.seed)
        self.n = {a: space.n for a, space in context.env_spec.action_spaces.items()}

    def act(self, obs, *, explore=True):
        actions = {a: self.rng.integers(self.n[a], size=len(o)) for a, o in obs.items()}
        zeros = {a: np.zeros(len(o), dtype=np.float32) for a, o in obs.items()}
        return Acting(actions, {a: {"value": zeros[a], "log_prob": zeros[a]} for a in obs})

    def value(self, obs):
        return {a: np.zeros(len(o), dtype=np.float32) for a, o in obs.items()}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class CountingLearner(Learner):
    def __init__(self, context, agent):
        self.context, self.agent = context, agent  # Learner.weights() hands the agent's state on

    def worker_init(self):
        WORKER_SEEDS.put((os.getpid(), self.context.seed))

    def learn(self, rollout):
        with LEARNED_STEPS.get_lock():
            LEARNED_STEPS.value += rollout.num_steps
        config = self.context.config
        if config.fail_after:
            with FAILED.get_lock():
                fail = not FAILED.value and LEARNED_STEPS.value >= config.fail_after
                FAILED.value = FAILED.value or fail
            if fail:
                if config.hard_exit:
                    os._exit(3)
                raise ValueError("boom")
        return {"value_loss": float(np.mean(rollout.returns["agent"] ** 2))}

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


class AsyncTestPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @hookimpl
    def rlf_register_algorithms(self, register):
        register("counting-pg", build_agent=UniformAgent, build_learner=CountingLearner, family="async-workers",
                 config=CountingConfig)


@pytest.fixture(scope="module")
def async_registry():
    from rlf.plugins import load_registry

    return load_registry(extra_plugins=[("async-test", AsyncTestPlugin())])


@pytest.fixture(autouse=True)
def fresh_counters():
    LEARNED_STEPS.value = 0
    FAILED.value = 0
    while not WORKER_SEEDS.empty():
        WORKER_SEEDS.get()
    yield
    assert mp.active_children() == [], "a worker outlived training"


def make(registry, tmp_path, steps, *extra):
    return rlf.make("counting-pg", env="gym:CartPole-v1", registry=registry,
                    overrides=[f"steps={steps}", "num_envs=2", "algo.rollout_steps=8", "algo.async_workers=3",
                               "seed=5", "progress=false", "checkpoint_interval=0", f"run_dir='{tmp_path}'", *extra])


def test_workers_collect_and_learn_exactly_the_budget_and_their_episodes_reach_the_stats(async_registry, tmp_path):
    algo = make(async_registry, tmp_path, 3000)
    started = time.monotonic()
    algo.train()
    assert time.monotonic() - started < 30
    assert algo.counters["env_steps"] == 3000
    assert LEARNED_STEPS.value == 3000  # not one rollout more than the Trainer counted
    with open(tmp_path / "episodes.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == algo.counters["episodes"] > 50
    assert [float(r["episode"]) for r in rows] == list(range(1, len(rows) + 1))
    assert {"return", "length", "env_step"} <= set(rows[0])
    seeds = dict(WORKER_SEEDS.get(timeout=5) for _ in range(3))
    assert len(seeds) == 3 and len(set(seeds.values())) == 3  # three processes, three seeds
    assert os.getpid() not in seeds and 5 not in seeds.values()
    with open(tmp_path / "metrics.csv") as handle:
        assert "value_loss" in next(csv.DictReader(handle))


def test_a_budget_that_is_not_a_whole_number_of_rollouts_is_cut_like_the_synchronous_path(async_registry, tmp_path):
    algo = make(async_registry, tmp_path, 1001)
    algo.train()
    # 1001 steps on 2 envs: the last claim rounds up to whole steps of both envs.
    assert algo.counters["env_steps"] == LEARNED_STEPS.value == 1002


def test_reports_still_queued_when_every_worker_has_finished_are_all_relayed(async_registry, tmp_path,
                                                                              monkeypatch):
    from rlf_plugin_a3c.strategy import AsyncWorkersStrategy

    relay = AsyncWorkersStrategy._step_async

    def slow_relay(self, limit):
        time.sleep(0.15)  # a slow main process: the workers finish long before their reports are read
        return relay(self, limit)

    monkeypatch.setattr(AsyncWorkersStrategy, "_step_async", slow_relay)
    algo = make(async_registry, tmp_path, 16 * 30)
    algo.train()
    assert algo.counters["env_steps"] == LEARNED_STEPS.value == 480


def test_a_worker_that_raises_stops_training_with_its_error(async_registry, tmp_path):
    algo = make(async_registry, tmp_path, 10**6, "algo.fail_after=200")
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"^async worker \d failed: ValueError: boom") as caught:
        algo.train()
    assert "worker traceback" in str(caught.value) and "in learn" in str(caught.value)
    assert time.monotonic() - started < 30  # the other workers, busy with a huge budget, were stopped


def test_a_worker_that_dies_without_a_word_is_reported(async_registry, tmp_path):
    algo = make(async_registry, tmp_path, 10**6, "algo.fail_after=200", "algo.hard_exit=true")
    with pytest.raises(EnvWorkerError, match=r"^async worker \d of counting-pg on gym:CartPole-v1 \(pid \d+\) "
                                             r"exited with code 3; lost workers are not replaced$"):
        algo.train()


def test_synchronous_training_starts_no_worker(async_registry, tmp_path):
    algo = rlf.make("counting-pg", env="gym:CartPole-v1", registry=async_registry,
                    overrides=["steps=500", "num_envs=2", "algo.rollout_steps=8", "progress=false",
                               f"run_dir='{tmp_path}'"])
    algo.train()
    assert algo.counters["env_steps"] == LEARNED_STEPS.value == 500  # 31 rollouts of 16, then one of 4
    assert WORKER_SEEDS.empty()


def test_a3c_runs_on_the_strategy_its_plugin_registers(tmp_path):
    from rlf.plugins import load_registry

    registry = load_registry()
    assert registry.strategy("async-workers").plugin == "a3c"
    assert "async-workers" in registry.plugins["a3c"].strategies
    resolved = rlf.resolve("a3c", "gym:CartPole-v1", registry=registry)
    assert resolved.strategy.name == "async-workers" and resolved.algo.async_workers == 4
    # the shared on-policy settings no longer carry A3C's worker count
    assert "async_workers" not in rlf.OnPolicyConfig.model_fields

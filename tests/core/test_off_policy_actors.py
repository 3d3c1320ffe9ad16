"""The off-policy strategy's overlapped actors (``algo.actors > 0``), with the core's test learners
and a small probe algorithm that records what its learner is handed."""

from __future__ import annotations

import csv
import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import pytest
from pydantic import Field

import rlf
from rlf import Acting, Agent, Learner, OffPolicyConfig, StrategyFamily, hookimpl
from rlf.plugins import load_registry
from rlf.testing import assert_trees_equal

# -- a probe: the agent acts with the weight version it holds, the learner records every step --------


class ProbeConfig(OffPolicyConfig):
    """Probe algorithm for actor tests."""

    fail_in_actor: bool = Field(False, description="Raise in act() inside actor processes.")
    rendezvous: str = Field("", description="Folder where actors meet before their first step.")


class VersionAgent(Agent):
    """Action = weight version (capped to the action space), so transitions show what actors hold."""

    def __init__(self, spec, config, seed, main_seed):
        self.n_actions = {a: spec.action_spaces[a].n for a in spec.agent_ids}
        self.version = 0
        self.seed, self.main_seed = seed, main_seed
        self.fail = config.fail_in_actor
        self.progress = 0
        self.rendezvous = Path(config.rendezvous) if config.rendezvous else None
        self.actors = config.actors  # all of them meet

    def _meet(self):
        # On a loaded machine one forked actor can spend the whole budget before the others have
        # stepped; meeting first makes "every actor's chunks reach the learner" a property of the
        # strategy rather than of the scheduler.
        (self.rendezvous / f"actor-{self.seed}").touch()
        deadline = time.monotonic() + 120
        while len(list(self.rendezvous.iterdir())) < self.actors:
            if time.monotonic() > deadline:
                raise TimeoutError("probe actors never all started")
            time.sleep(0.01)
        self.rendezvous = None

    def act(self, obs, *, explore=True):
        if self.fail and self.seed != self.main_seed:
            raise ValueError("probe failure inside an actor")
        if self.rendezvous is not None and self.seed != self.main_seed:
            self._meet()
        return Acting({a: np.full(len(o), min(self.version, self.n_actions[a] - 1)) for a, o in obs.items()})

    def on_progress(self, env_steps, episodes_ended):
        self.progress += env_steps

    def metrics(self):
        return {"version": float(self.version)}

    def state_dict(self):
        return {"version": self.version, "progress": self.progress}

    def load_state_dict(self, state):
        self.version = int(state["version"])
        self.progress = int(state["progress"])


class RecordingLearner(Learner):
    def __init__(self, agent, spec):
        self.agent, self.spec = agent, spec
        self.calls: list[rlf.Transitions] = []

    def learn(self, experience):
        self.calls.append(experience)
        self.agent.version = len(self.calls) // 50
        return {"calls": float(len(self.calls))}

    def state_dict(self):
        return {"calls": len(self.calls)}

    def load_state_dict(self, state):
        pass


def build_probe_agent(context):
    return VersionAgent(context.env_spec, context.config, context.seed, context.run.seed)


def build_probe_learner(context, agent):
    return RecordingLearner(agent, context.env_spec)


class ProbePlugin:
    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_algorithms(self, register):
        register("probe", build_agent=build_probe_agent, build_learner=build_probe_learner,
                 family=StrategyFamily.OFF_POLICY, config=ProbeConfig, default_env="gym:CartPole-v1")


@pytest.fixture(scope="module")
def probe_registry():
    from support import TestPlugin

    return load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("probe", ProbePlugin())])


def make(registry, algorithm, env, tmp_path, *settings):
    return rlf.make(algorithm, env, registry=registry,
                    overrides=["progress=false", f"run_dir='{tmp_path}'", "checkpoint_interval=0", *settings])


def read_rows(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


# -- tests ------------------------------------------------------------------------------------------


def test_learner_sees_one_wide_vector_with_only_the_senders_rows_alive(probe_registry, tmp_path):
    meet = tmp_path / "meet"
    meet.mkdir()
    algo = make(probe_registry, "probe", "gym:CartPole-v1", tmp_path / "run", "steps=3000", "num_envs=2",
                "algo.actors=3", "algo.actor_sync_interval=200", f"algo.rendezvous='{meet}'")
    algo.train()
    assert algo.counters["env_steps"] == 3000  # the budget is exact, whatever the actors ran ahead
    assert mp.active_children() == []
    calls = algo.strategy.learner.calls
    assert sum(int(t.alive["agent"].sum()) for t in calls) == 3000
    senders = set()
    for t in calls:
        alive = t.alive["agent"]
        assert alive.shape == (6,) and t.obs["agent"].shape == (6, 4)
        rows = np.flatnonzero(alive)
        assert len(rows) == 2 and rows[0] % 2 == 0 and rows[1] == rows[0] + 1  # one actor's block
        senders.add(int(rows[0]) // 2)
        assert not t.obs["agent"][~alive].any() and not t.episode_ended[~alive].any()
    assert senders == {0, 1, 2}
    # consecutive steps of one actor's env chain: next_obs of a step is the obs of the next one
    for actor in range(3):
        own = [t for t in calls if t.alive["agent"][2 * actor]]
        for before, after in zip(own, own[1:], strict=False):
            row = 2 * actor
            if not before.episode_ended[row]:
                np.testing.assert_array_equal(before.next_obs["agent"][row], after.obs["agent"][row])


def test_actors_act_with_the_weights_pushed_to_them(probe_registry, tmp_path):
    algo = make(probe_registry, "probe", "gym:CartPole-v1", tmp_path, "steps=4000", "algo.actors=2",
                "algo.actor_sync_interval=100")
    algo.train()
    calls = algo.strategy.learner.calls
    # the learner's version rises every 50 calls; actors start at version 0 and only learn the new
    # one from pushes, so late actions must carry version >= 1 (CartPole's action 1)
    early = np.concatenate([t.actions["agent"][t.alive["agent"]] for t in calls[:40]])
    late = np.concatenate([t.actions["agent"][t.alive["agent"]] for t in calls[-500:]])
    assert (early == 0).all()
    assert (late == 1).mean() > 0.9
    # the main agent's exploration counter advanced by every env step the actors made and we used
    assert algo.strategy.agent.progress == 4000


def test_tabular_q_learns_the_line_env_with_actors(registry, tmp_path):
    algo = make(registry, "tabular-q", "line", tmp_path, "steps=4000", "num_envs=2", "algo.actors=2",
                "algo.actor_sync_interval=100", "algo.exploration.decay=0.98")
    algo.train()
    rows = read_rows(tmp_path / "episodes.csv")
    assert [int(float(r["episode"])) for r in rows] == list(range(1, len(rows) + 1))
    assert {"epsilon", "return/walker", "reached"} <= set(rows[0])
    result = algo.evaluate(episodes=3)
    assert result["reached"] == 1.0
    assert result["length"] == 4.0  # straight to the end of the 5-cell line


def test_actor_failure_is_raised_in_the_main_process(probe_registry, tmp_path):
    algo = make(probe_registry, "probe", "gym:CartPole-v1", tmp_path, "steps=2000", "algo.actors=1",
                "algo.fail_in_actor=true")
    with pytest.raises(RuntimeError, match="actor 0: ValueError: probe failure inside an actor"):
        algo.train()
    assert mp.active_children() == []


def test_resume_with_actors_continues_the_counters(registry, tmp_path):
    algo = make(registry, "tabular-q", "line", tmp_path, "steps=1000", "algo.actors=2")
    algo.train()
    path = algo.save(tmp_path / "first.rlf")
    again = rlf.load(path, registry=registry, overrides=[f"run_dir='{tmp_path / 'again'}'"])
    summary = again.train(steps=1600)
    assert again.counters["env_steps"] == 1600
    assert summary["env_step"] == 1600
    assert again.strategy.tracker.episodes > algo.strategy.tracker.episodes
    assert mp.active_children() == []


def test_synchronous_mode_stays_reproducible(registry, tmp_path):
    runs = []
    for name in ("a", "b"):
        algo = make(registry, "tabular-q", "line", tmp_path / name, "steps=600", "seed=3")
        algo.train()
        runs.append((tmp_path / name / "episodes.csv").read_text())
    assert runs[0] == runs[1]


def test_lockstep_actors_are_reproducible_and_take_turns(probe_registry, registry, tmp_path):
    runs = []
    for name in ("a", "b"):
        algo = make(registry, "tabular-q", "line", tmp_path / name, "steps=1200", "seed=3", "num_envs=2",
                    "algo.actors=2", "algo.actor_lockstep=true", "algo.actor_sync_interval=100")
        algo.train()
        runs.append(((tmp_path / name / "episodes.csv").read_text(), algo.strategy.learner.state_dict()))
        assert mp.active_children() == []
    assert runs[0][0] == runs[1][0] and len(runs[0][0].splitlines()) > 20
    assert_trees_equal(runs[0][1], runs[1][1])
    # chunks come actor 0, 1, 0, 1, ... whichever actor is faster
    algo = make(probe_registry, "probe", "gym:CartPole-v1", tmp_path / "probe", "steps=640", "num_envs=2",
                "algo.actors=2", "algo.actor_lockstep=true")
    algo.train()
    senders = [int(np.flatnonzero(t.alive["agent"])[0]) // 2 for t in algo.strategy.learner.calls]
    assert senders == [(step // 32) % 2 for step in range(len(senders))]  # 32 steps of 2 envs per chunk

"""The learner on stale chunks, the strategy's staleness bound, and the config's one-line refusals."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from appo_helpers import LaggingPool, lagging_registry, read_rows
from rlf_plugin_appo.agent import VERSION_KEY
from rlf_plugin_appo.learner import Trajectory

import rlf
from rlf.errors import ConfigError
from rlf.testing import assert_trees_equal


def toml_value(value):
    """Overrides are TOML: booleans are lowercase and strings quoted (rlf refuses 'False' for a bool)."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


def cartpole(tmp_path, registry=None, vector="auto", **algo):
    overrides = ["progress=false", "checkpoint_interval=0", f"run_dir='{tmp_path / 'run'}'", "log_interval=128",
                 f"vector='{vector}'"]
    overrides += [f"algo.{key}={toml_value(value)}" for key, value in algo.items()]
    return rlf.make("appo", "gym:CartPole-v1", overrides=overrides, registry=registry)


# -- the learner -----------------------------------------------------------------------------------
def build(tmp_path, **algo):
    algo.setdefault("epochs", 1)
    made = cartpole(tmp_path, **algo)
    spec = made._probe_spec()
    context = made._context(spec)
    agent = made.resolved.algorithm.build_agent(context)
    return agent, made.resolved.algorithm.build_learner(context, agent)


def chunk_from(agent, steps=16, width=4, seed=0):
    """A Trajectory acted by ``agent`` on random CartPole-like observations."""
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(steps + 1, width, 4)).astype(np.float32)
    acting = [agent.act({"agent": obs[t]}) for t in range(steps)]
    actions = np.stack([a.actions["agent"] for a in acting])
    log_probs = np.stack([a.extras["agent"]["log_prob"] for a in acting])
    versions = np.stack([a.extras["agent"][VERSION_KEY] for a in acting])
    ends = np.zeros((steps, width), bool)
    return Trajectory("agent", obs[:-1], actions, np.ones((steps, width), np.float32), ends, ends, obs[1:],
                      log_probs, versions)


def test_a_chunk_acted_by_the_learners_own_weights_has_ratio_one(tmp_path):
    agent, learner = build(tmp_path)
    metrics = learner.learn(chunk_from(agent))
    assert metrics["mean_rho"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["clip_fraction"] == 0.0  # the first epoch's first minibatch is exactly on-policy


def test_the_learner_learns_from_a_stale_chunk_with_its_behaviour_log_probs(tmp_path):
    """Weights pushed to an actor, then the learner moves on: the actor's chunk has ratios != 1, the
    update still improves the surrogate's objective (the log-probs of positive-advantage actions)."""
    agent, learner = build(tmp_path, lr=0.01, normalize_advantages=False)
    actor, _ = build(tmp_path)
    actor.load_state_dict(learner.push_state())
    for seed in range(3):  # the learner moves on: three updates the actor never sees
        learner.learn(chunk_from(agent, seed=10 + seed))
    stale = chunk_from(actor, seed=99)
    assert (stale.staleness == 0).all() and learner.updates == 3
    stale.staleness = learner.updates - stale.staleness
    metrics = learner.learn(stale)
    assert abs(metrics["mean_rho"] - 1.0) > 1e-3, "the behaviour policy was not the learner's"
    assert metrics["staleness"] == 3.0
    assert np.isfinite(list(metrics.values())).all()


def test_pushed_weights_carry_the_version_and_leave_the_actors_sampling_stream(tmp_path):
    agent, learner = build(tmp_path)
    actor, _ = build(tmp_path)
    generator = actor.generator.get_state().clone()
    learner.learn(chunk_from(agent))
    actor.load_state_dict(learner.push_state())
    assert actor.version == 1
    assert torch.equal(actor.generator.get_state(), generator)
    for mine, theirs in zip(actor.networks["agent"].parameters(), agent.networks["agent"].parameters(), strict=True):
        assert torch.equal(mine, theirs)
    acting = actor.act({"agent": np.zeros((3, 4), np.float32)})
    assert acting.extras["agent"][VERSION_KEY].tolist() == [1, 1, 1]


def test_a_quiet_chunk_is_not_blown_up_to_unit_advantages_with_a_window(tmp_path):
    """Per-chunk normalisation divides a chunk's advantages by their own spread, noise included; with a
    window the divisor is the spread the last few thousand samples had."""
    def chunks(agent):
        loud, quiet = chunk_from(agent, seed=1), chunk_from(agent, seed=2)
        loud.rewards = np.random.default_rng(1).normal(0.0, 10.0, size=loud.rewards.shape).astype(np.float32)
        quiet.rewards = np.random.default_rng(2).normal(0.0, 0.01, size=quiet.rewards.shape).astype(np.float32)
        return loud, quiet

    scales = {}
    for window in (0, 1024):
        agent, learner = build(tmp_path, advantage_window=window)
        loud, quiet = chunks(agent)
        for _ in range(4):
            learner.learn(loud)
        scales[window] = learner.learn(quiet)["advantage_scale"]
    assert scales[1024] > 20 * scales[0], scales

    state = learner.state_dict()
    _, fresh = build(tmp_path, advantage_window=1024)
    fresh.load_state_dict(state)
    assert_trees_equal(fresh.advantage_stats.state_dict(), learner.advantage_stats.state_dict())
    del state["advantage_stats"]  # a checkpoint from before the setting still loads
    _, old = build(tmp_path, advantage_window=1024)
    old.load_state_dict(state)
    assert old.advantage_stats.count == 0


def test_checkpoints_with_the_first_form_of_the_window_state_load_into_the_normalizer(tmp_path):
    """The series' appo-r2 runs checkpointed an exponential mean and mean square ({mean, square, seen});
    they resume with the same statistics, and the next chunk weighs what it weighed before."""
    rng = np.random.default_rng(3)
    history = rng.normal(2.0, 3.0, size=700)
    agent, learner = build(tmp_path, advantage_window=512)
    state = learner.state_dict()
    # the first form after 700 samples with a window of 512: the moments of the whole history
    # stand in here for the exponential ones (the conversion reads them, whatever their history)
    state["advantage_stats"] = {"mean": float(history.mean()), "square": float(np.square(history).mean()),
                                "seen": 700}
    learner.load_state_dict(state)
    stats = learner.advantage_stats
    assert stats.count == 512
    assert float(stats.mean) == pytest.approx(history.mean()) and float(stats.var) == pytest.approx(history.var())
    chunk = rng.normal(-4.0, 1.0, size=128)
    stats.update(chunk)
    weight = 128 / 512  # the first form's weight once seen > window
    old_mean = history.mean() + weight * (chunk.mean() - history.mean())
    old_square = np.square(history).mean() + weight * (np.square(chunk).mean() - np.square(history).mean())
    assert float(stats.mean) == pytest.approx(old_mean) and float(stats.var) == pytest.approx(old_square - old_mean ** 2)


# -- the strategy on stale chunks (an in-process pool that hands weights out late) -----------------
@pytest.fixture
def lagging():
    registry = lagging_registry()
    yield registry
    LaggingPool.lag = 0
    LaggingPool.instances.clear()


def test_the_learner_consumes_chunks_acted_on_old_weights(tmp_path, lagging):
    LaggingPool.lag = 5
    algo = cartpole(tmp_path, registry=lagging, vector="lagging", actors=2, rollout_steps=16, max_staleness=10)
    algo.train(steps=1280)
    rows = read_rows(tmp_path / "run" / "metrics.csv")
    assert float(rows[0]["staleness"]) < 1.0  # one row = two chunks of 64 env steps
    late = [float(row["staleness"]) for row in rows[6:]]
    # the pool acts with the weights of 5 pushes before the newest: 5 updates behind, once 5 exist
    # (local actors on CartPole run about 3 behind: a pool that was not used would show it)
    assert late and all(value == 5.0 for value in late), late
    assert all(float(row["chunks_dropped"]) == 0 for row in rows)
    assert all(abs(float(row["mean_rho"]) - 1.0) > 1e-6 for row in rows[6:])
    assert LaggingPool.instances[-1].closed


def test_chunks_staler_than_max_staleness_are_dropped_unlearned(tmp_path, lagging):
    LaggingPool.lag = 4
    algo = cartpole(tmp_path, registry=lagging, vector="lagging", actors=1, rollout_steps=16, max_staleness=2)
    algo.train(steps=16 * 8 * 10)
    # A dropped chunk pushes nothing, so the pool's lag is in pushes, not updates: chunks 1-3 are
    # acted on version 0 (0, 1, 2 updates behind: learned), chunk 4 on version 0 at update 3 (dropped),
    # and so on: every chunk past the third is 3 behind and dropped.
    rows = read_rows(tmp_path / "run" / "metrics.csv")
    assert float(rows[-1]["chunks_dropped"]) == 7
    assert LaggingPool.instances[-1].closed


# -- config --------------------------------------------------------------------------------------
@pytest.mark.parametrize("override,needle", [
    ("algo.actors=0", "actors"), ("algo.rho_bar=0", "rho_bar"), ("algo.max_staleness=0", "max_staleness"),
    ("algo.c_bar=2.0", "c_bar"), ("algo.memory='lstm'", "memory"), ("algo.value_clip=0.2", "value_clip"), ("algo.rollout_steps=0", "rollout_steps"),
    ("algo.actor_restarts=-1", "actor_restarts"), ("algo.advantage_window=-5", "advantage_window")])
def test_bad_values_are_one_line_errors(override, needle):
    with pytest.raises(ConfigError) as caught:
        rlf.make("appo", "gym:CartPole-v1", overrides=[override])
    text = str(caught.value)
    assert needle in text and "\n" not in text.strip(), text


def test_envs_that_do_not_split_among_actors_are_refused_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-c", "import sys; from rlf.cli import main; sys.exit(main())", "train", "appo", "--env", "gym:CartPole-v1", "--steps", "256",
                             "--set", "num_envs=5", "--set", "algo.actors=2", "--set", f"run_dir={tmp_path / 'r'}",
                             "--set", "progress=false"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("rlf: error:")]
    assert len(lines) == 1 and "num_envs=5" in lines[0] and "algo.actors=2" in lines[0], result.stderr
    assert not (tmp_path / "r").exists()  # refused as the settings resolve, before the run directory
    assert "Traceback" not in result.stderr

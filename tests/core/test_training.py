"""Both strategies, driven by the one Trainer, with the small numpy learners from support.py."""

import csv
import json

import numpy as np
import pytest

import rlf


def make(registry, algorithm, env, tmp_path, *overrides):
    return rlf.make(algorithm, env, overrides=["progress=false", f"run_dir='{tmp_path}'", *overrides],
                    registry=registry)


def episodes(run_dir):
    with open(run_dir / "episodes.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_on_policy_learns_cartpole_with_a_linear_policy(registry, tmp_path):
    algo = make(registry, "linear-pg", "gym:CartPole-v1", tmp_path, "steps=60000", "num_envs=8",
                "algo.lr=0.1", "algo.rollout_steps=16", "seed=1")
    algo.train()
    rows = episodes(tmp_path)
    first = np.mean([float(r["return"]) for r in rows[:50]])
    last = np.mean([float(r["return"]) for r in rows[-50:]])
    assert first < 30 and last > 2.5 * first, (first, last)  # measured: 21 -> 84 (seeds 0-2: 3.8x-4x)
    assert algo.evaluate(episodes=5)["return"] > 100         # measured: 265-500
    # one rollout of 16 steps x 8 envs per update; the last one shrinks to fit the budget exactly
    rollouts = algo.strategy.learner.seen_rollouts
    assert rollouts[:-1] == [128] * (len(rollouts) - 1) and sum(rollouts) == 60000


def test_off_policy_solves_frozen_lake_with_tabular_q(registry, tmp_path):
    algo = make(registry, "tabular-q", "gym:FrozenLake-v1", tmp_path, "steps=15000", "env.kwargs={is_slippery=false}",
                "algo.exploration.decay=0.99", "seed=2")
    algo.train()
    result = algo.evaluate(episodes=5)
    assert result["return"] == 1.0 and result["length"] == 6.0
    rows = episodes(tmp_path)
    eps = [float(r["epsilon"]) for r in rows]
    assert eps[0] == 1.0 and eps[1] == pytest.approx(0.99) and eps[-1] == pytest.approx(0.05)


def test_per_step_exploration_schedule_is_linear(registry, tmp_path):
    algo = make(registry, "tabular-q", "line", tmp_path, "steps=1000", "algo.exploration.schedule='per_step'",
                "algo.exploration.decay_steps=500", "algo.exploration.end=0.1")
    algo.train()
    assert algo.strategy.agent.epsilon.value == pytest.approx(0.1)
    assert algo.strategy.agent.epsilon.env_steps == 1000


def test_multi_agent_alive_masks_and_per_agent_returns(registry, tmp_path):
    algo = make(registry, "linear-pg", "line", tmp_path, "steps=2048", "num_envs=4", "algo.rollout_steps=32",
                "algo.lr=0.1")
    algo.train()
    rollout = algo.strategy.learner.last_rollout
    # the quitter leaves after 2 steps of every episode: it is alive exactly on those steps
    quitter_alive = rollout.alive["quitter"]
    assert quitter_alive.any() and not quitter_alive.all()
    assert rollout.alive["walker"].all()
    assert not (rollout.rewards["quitter"][~quitter_alive]).any()
    rows = episodes(tmp_path)
    assert {"return/walker", "return/quitter", "reached", "length"} <= set(rows[0])
    result = algo.evaluate(episodes=3)
    assert result["return/walker"] == 1.0 and result["reached"] == 1.0


def test_run_directory_resume_and_tensorboard(registry, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    algo = make(registry, "tabular-q", "line", tmp_path, "steps=3000", "log_interval=500",
                "checkpoint_interval=1000", "seed=5")
    algo.train()
    assert {"run.json", "checkpoint.rlf", "metrics.csv", "episodes.csv", "tensorboard"} <= {
        p.name for p in tmp_path.iterdir()}
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["config"]["run"]["steps"] == 3000 and run["plugins"]["algorithm"] == "test-plugin"
    state = rlf.storage.checkpoint.load(tmp_path / "checkpoint.rlf")
    assert state["counters"]["env_steps"] == 3000 and state["plugins"]["algorithm"][0] == "test-plugin"
    table_before = algo.strategy.agent.tables
    eps_before = algo.strategy.agent.epsilon.value

    resumed = rlf.load(tmp_path, registry=registry, overrides=["steps=5000"])
    assert resumed.counters["env_steps"] == 3000
    resumed.train()
    assert resumed.counters["env_steps"] == 5000
    agent = resumed.strategy.agent
    assert agent.epsilon.episodes > algo.strategy.agent.epsilon.episodes  # schedule continued, not restarted
    assert agent.epsilon.value <= eps_before
    assert set(table_before["walker"]) <= set(agent.tables["walker"])
    steps = [int(r["env_step"]) for r in csv.DictReader(open(tmp_path / "metrics.csv"))]
    assert steps == sorted(steps) and steps[-1] == 5000 and 3000 in steps

    board = EventAccumulator(str(tmp_path / "tensorboard"))
    board.Reload()
    tags = board.Tags()["scalars"]
    assert "steps_per_second" in tags and "mean_return" in tags and "mean_reached" in tags
    assert board.Scalars("steps_per_second")[-1].step == 5000


def test_training_again_continues_the_same_agent(registry, tmp_path):
    algo = make(registry, "tabular-q", "line", tmp_path, "steps=1000")
    algo.train()
    tables = {k: v.copy() for k, v in algo.strategy.agent.tables["walker"].items()}
    episodes_before = algo.strategy.agent.epsilon.episodes
    algo.train(steps=2000)
    agent = algo.strategy.agent
    assert algo.counters["env_steps"] == 2000
    assert agent.epsilon.episodes > episodes_before  # the schedule continued
    assert set(tables) <= set(agent.tables["walker"])  # the table was kept, not rebuilt empty


def test_stats_survive_an_exception_mid_run(registry, tmp_path):
    algo = make(registry, "tabular-q", "line", tmp_path, "steps=5000", "log_interval=100", "algo.fail_after=1500")
    # the plugin's learner failing is one error naming the plugin and the hook, not its traceback
    with pytest.raises(rlf.errors.PluginRunError, match=r"'test-plugin' failed in algorithm 'tabular-q' learn\(\): "
                                                        "RuntimeError: learner blew up"):
        algo.train()
    rows = episodes(tmp_path)
    assert len(rows) > 50 and all(r["return/walker"] != "" for r in rows)
    metric_rows = list(csv.DictReader(open(tmp_path / "metrics.csv")))
    assert len(metric_rows) >= 10 and int(metric_rows[-1]["env_step"]) <= 1500
    assert not (tmp_path / "checkpoint.rlf").exists()  # no checkpoint from a crashed state


def test_save_and_load_a_checkpoint_file(registry, tmp_path):
    algo = make(registry, "tabular-q", "gym:FrozenLake-v1", tmp_path / "run", "steps=8000",
                "env.kwargs={is_slippery=false}", "algo.exploration.decay=0.98")
    algo.train()
    path = algo.save(tmp_path / "frozen.rlf")
    loaded = rlf.load(path, registry=registry)
    assert loaded.evaluate(episodes=3) == algo.evaluate(episodes=3)
    copy = loaded.save(tmp_path / "copy.rlf")  # a loaded algorithm saves without training first
    assert rlf.load(copy, registry=registry).counters == algo.counters


def test_incompatible_environment_is_refused_before_training(registry, tmp_path):
    algo = make(registry, "linear-pg", "gym:Pendulum-v1", tmp_path, "steps=10")
    with pytest.raises(rlf.IncompatibleError, match="discrete"):
        algo.train()
    assert not (tmp_path / "checkpoint.rlf").exists()


def test_recording_writes_a_gif(registry, tmp_path):
    algo = make(registry, "tabular-q", "line", tmp_path, "steps=300")
    algo.train()
    result = algo.evaluate(episodes=1, record=tmp_path / "line.gif")
    from PIL import Image

    with Image.open(tmp_path / "line.gif") as gif:
        assert gif.n_frames == result["length"] + 1  # the start frame, then one per step
        gif.seek(gif.n_frames - 1)
        last = np.asarray(gif.convert("RGB"))
    assert last[:, -8:].min() == 255 and last[:, :8].max() == 0  # the final frame: walker at the far end
    with pytest.raises(rlf.ConfigError, match="mp4 or .gif"):
        algo.evaluate(episodes=1, record=tmp_path / "line.avi")


def test_a_video_that_cannot_be_written_is_refused_before_the_evaluation_plays(registry, tmp_path, monkeypatch):
    import sys

    import rlf.api

    algo = make(registry, "tabular-q", "line", tmp_path, "steps=300")
    algo.train()

    def played(*args, **kwargs):
        raise AssertionError("the evaluation played before refusing the video")

    monkeypatch.setattr(rlf.api, "make_vector_env", played)
    (tmp_path / "notes.txt").write_text("a file, not a folder")
    (tmp_path / "clips.gif").mkdir()
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # what an install without rlf[video] gives
    for record, message in ((tmp_path / "notes.txt" / "play.gif", "notes.txt is a file, not a folder"),
                            (tmp_path / "clips.gif", "it is a folder"),
                            (tmp_path / "play.mp4", r"needs imageio and imageio-ffmpeg: pip install 'rlf\[video\]'"),
                            (tmp_path / "play.avi", "use a .mp4 or .gif")):
        with pytest.raises(rlf.ConfigError, match=message):
            algo.evaluate(episodes=10, record=record)


def test_a_failed_video_write_keeps_the_earlier_video(registry, tmp_path, monkeypatch):
    from PIL import Image

    algo = make(registry, "tabular-q", "line", tmp_path, "steps=300")
    algo.train()
    video = tmp_path / "line.gif"
    algo.evaluate(episodes=1, record=video)
    before = video.read_bytes()
    real_save = Image.Image.save

    def disk_full(self, fp, *args, **kwargs):
        real_save(self, fp, *args, **kwargs)
        with open(fp, "r+b") as half:  # the disk filled halfway through the file
            half.truncate(len(before) // 2)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", disk_full)
    with pytest.raises(OSError, match="No space left"):
        algo.evaluate(episodes=1, record=video)
    assert video.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("*.gif")) == ["line.gif"]
    assert not list(tmp_path.glob(".*partial*"))


def test_the_core_runs_without_torch(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parents[1]
    script = tmp_path / "no_torch.py"
    script.write_text(f"""
import builtins, sys
sys.path.insert(0, {str(tests)!r})
real_import = builtins.__import__

def guard(name, *args, **kwargs):
    if name == "torch" or name.startswith("torch."):
        raise ImportError("torch is forbidden here")
    return real_import(name, *args, **kwargs)

builtins.__import__ = guard
import rlf
from support import TestPlugin
from rlf.plugins import load_registry
registry = load_registry(extra_plugins=[("t", TestPlugin())])
algo = rlf.make("linear-pg", "gym:CartPole-v1", registry=registry,
                overrides=["steps=600", "progress=false", "run_dir='{tmp_path / 'run'}'"])
algo.train()
print(algo.evaluate(episodes=1)["length"] > 0)
""")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


def test_iterations_count_strategy_steps(registry, tmp_path):
    algo = make(registry, "linear-pg", "gym:CartPole-v1", tmp_path, "steps=1024", "num_envs=4",
                "algo.rollout_steps=32", "log_interval=512")
    algo.train()
    rows = list(csv.DictReader(open(tmp_path / "metrics.csv", newline="")))
    assert "updates" not in rows[0]
    assert [int(r["iterations"]) for r in rows] == [4, 8]  # one rollout of 32 x 4 envs per iteration


def test_recording_without_the_renderers_package_is_a_config_error(registry, tmp_path, monkeypatch):
    import gymnasium

    from rlf.envs import GymVector

    algo = make(registry, "tabular-q", "gym:FrozenLake-v1", tmp_path, "steps=64")
    algo.train()

    def missing(self):  # what gymnasium's classic-control envs raise without pygame
        raise gymnasium.error.DependencyNotInstalled('pygame is not installed, run `pip install "gymnasium[toy-text]"`')

    monkeypatch.setattr(GymVector, "render", missing)
    with pytest.raises(rlf.ConfigError, match="recording gym:FrozenLake-v1 needs a package its renderer imports: pygame"):
        algo.evaluate(episodes=1, record=tmp_path / "play.gif")

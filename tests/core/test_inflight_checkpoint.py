"""A checkpoint's episodes under way (exact resume) that do not fit the envs: the resume starts fresh episodes
with its one `resume:` line, never a traceback or an agent fed observations of another shape."""

import numpy as np
import pytest

import rlf
from rlf.api import make
from rlf.storage import checkpoint as ckpt


@pytest.fixture
def run_dir(registry, tmp_path):
    path = tmp_path / "run"
    make("linear-pg", "gym:CartPole-v1", registry=registry, overrides=[
        "vector='sync'", "num_envs=2", "steps=64", "algo.rollout_steps=16", "progress=false",
        f"run_dir='{path}'"]).train()
    state = ckpt.load(path / "checkpoint.rlf")
    assert "envs" in state["strategy"]["inflight"]  # CartPole's state is saved: the resume would be exact
    return path


@pytest.mark.parametrize("obs", [
    np.zeros((5, 3), np.float32),          # another shape
    np.zeros((2, 4), np.complex64),        # not castable to the space's float32
    "not an array",
    {"nested": 1},
    None,
])
def test_malformed_observations_under_way_mean_fresh_episodes(registry, run_dir, obs, capsys):
    state = ckpt.load(run_dir / "checkpoint.rlf")
    state["strategy"]["inflight"]["obs"]["agent"] = obs
    ckpt.save(run_dir / "checkpoint.rlf", state)
    algo = rlf.load(run_dir, registry=registry, overrides=["steps=128"])
    algo.train()
    assert algo.counters["env_steps"] >= 128
    err = capsys.readouterr().err
    assert "resume: starting fresh episodes (the checkpoint's env state does not fit" in err
    assert "Traceback" not in err


def test_observations_that_fit_continue_the_episodes(registry, run_dir, capsys):
    rlf.load(run_dir, registry=registry, overrides=["steps=128"]).train()
    assert "starting fresh episodes" not in capsys.readouterr().err

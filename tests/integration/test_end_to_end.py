"""Every installed algorithm on every installed environment, a few hundred steps each.

The pairs come from ``rlf.registry()``, so a new plugin is covered the day it is installed. A pair the
registry metadata calls compatible must train, write a checkpoint that loads back to the same agent,
evaluate, and resume; a pair it calls incompatible (action-space kind, or multi-agent env for a
single-agent algorithm) must refuse with the one-line ``IncompatibleError``. A plugin may refuse more
pairs than its metadata says (say, a tabular learner on continuous observations), but never its own
default environment.
"""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import rlf
from rlf.api import CHECKPOINT_FILE, RUN_FILE
from rlf.envs import EnvFactory, action_kinds, describe_env
from rlf.storage import checkpoint

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = rlf.registry()
STEPS = 256
RESUME_STEPS = 64
EVAL_STEPS = 200
# Concrete ids for the core's gym:<id>: one discrete and one continuous action space.
GYM_IDS = ("CartPole-v1", "Pendulum-v1")
# Episode caps so an evaluation episode ends within EVAL_STEPS, whatever the policy does.
EPISODE_CAPS = {"max_episode_steps": 50, "max_steps": 50}
# Knobs that make a few hundred steps enough for several updates, set where an algorithm has them.
SMALL_BUDGET = {"rollout_steps": 32, "min_replay_size": 64, "learning_starts": 64, "batch_size": 32,
                "train_frequency": 4}
BOOKKEEPING = {"env_step", "iterations", "episodes", "steps_per_second"}


def environment_names() -> list[str]:
    names = []
    for name, spec in sorted(REGISTRY.environments.items()):
        if not spec.prefix:
            names.append(name)
        elif name == "gym:":
            names.extend(f"gym:{gym_id}" for gym_id in GYM_IDS)
        else:
            names.append(f"{name}{spec.config.model_fields['id'].get_default()}")
    return names


@dataclass(frozen=True)
class EnvFacts:
    action_kinds: frozenset[str]
    multi_agent: bool


@cache
def env_facts(env: str) -> EnvFacts:
    spec = REGISTRY.environment(env)
    config = rlf.resolve(next(iter(REGISTRY.algorithms)), env, overrides=env_overrides(env)).env
    instance = EnvFactory(spec.build_env, config)()
    try:
        described = describe_env(env, instance, 1)
    finally:
        instance.close()
    return EnvFacts(frozenset(action_kinds(described).values()), described.multi_agent)


def env_overrides(env: str) -> list[str]:
    fields = REGISTRY.environment(env).config.model_fields
    return [f"env.{key}={value}" for key, value in EPISODE_CAPS.items() if key in fields]


def overrides(algorithm: str, env: str, run_dir: Path) -> list[str]:
    fields = REGISTRY.algorithm(algorithm).config.model_fields
    knobs = [f"algo.{key}={value}" for key, value in SMALL_BUDGET.items() if key in fields]
    # vector=sync: emulator subprocesses would cost more to start than these short runs take
    return [f"steps={STEPS}", "num_envs=2", "vector='sync'", "seed=3", "device='cpu'", "progress=false",
            "checkpoint_interval=0",
            f"run_dir='{run_dir}'", *knobs, *env_overrides(env)]


def compatible_by_metadata(algorithm: str, env: str) -> bool:
    spec, facts = REGISTRY.algorithm(algorithm), env_facts(env)
    return facts.action_kinds <= set(spec.action_spaces) and (spec.multi_agent or not facts.multi_agent)


def has_state(tree) -> bool:
    """Whether a state tree holds anything (arrays or numbers) a learner would update."""
    if isinstance(tree, dict):
        return any(has_state(v) for v in tree.values())
    if isinstance(tree, list | tuple):
        return any(has_state(v) for v in tree)
    return isinstance(tree, np.ndarray | int | float) and not isinstance(tree, bool)


def assert_one_line_incompatible(error: rlf.IncompatibleError, algorithm: str) -> None:
    message = str(error)
    assert message and "\n" not in message, f"IncompatibleError must be one line, got {message!r}"
    assert algorithm in message, f"the error should name the algorithm: {message!r}"


PAIRS = [(algorithm, env) for algorithm in sorted(REGISTRY.algorithms) for env in environment_names()]


def test_every_plugin_in_the_repository_is_installed_and_loads():
    assert REGISTRY.errors == {}, f"plugins failed to load: {REGISTRY.errors}"
    installed = {info.distribution for info in REGISTRY.plugins.values()}
    for directory in sorted((ROOT / "plugins").glob("*/pyproject.toml")):
        distribution = "rlf-plugin-" + directory.parent.name.replace("_", "-")
        assert distribution in installed, f"{distribution} is not installed or registered no hook"


def test_the_matrix_is_not_empty():
    assert len(REGISTRY.algorithms) >= 1 and len(environment_names()) >= 2
    assert any(compatible_by_metadata(a, e) for a, e in PAIRS)


@pytest.mark.parametrize(("algorithm", "env"), PAIRS, ids=[f"{a}-on-{e}" for a, e in PAIRS])
def test_train_checkpoint_evaluate_resume(algorithm: str, env: str, tmp_path: Path):
    spec = REGISTRY.algorithm(algorithm)
    algo = rlf.make(algorithm, env, overrides=overrides(algorithm, env, tmp_path / "run"))
    if not compatible_by_metadata(algorithm, env):
        with pytest.raises(rlf.IncompatibleError) as refused:
            algo.train()
        assert_one_line_incompatible(refused.value, algorithm)
        return
    try:
        summary = algo.train()
    except rlf.IncompatibleError as refused:
        assert env != spec.default_env, f"{algorithm} refuses its own default environment: {refused}"
        assert_one_line_incompatible(refused, algorithm)
        return

    # trains: the whole budget, finite metrics, and a learner with state actually learned something
    assert summary["env_step"] >= STEPS
    assert all(math.isfinite(v) for v in summary.values()), summary
    assert (tmp_path / "run" / "metrics.csv").is_file()
    saved = checkpoint.load(tmp_path / "run" / CHECKPOINT_FILE)
    assert int(saved["counters"]["env_steps"]) == summary["env_step"]
    if has_state(saved["strategy"]["learner"]):
        learned = set(summary) - BOOKKEEPING - {k for k in summary if k.startswith("mean_")}
        assert learned, f"{algorithm} has learner state but reported no learning metrics in {STEPS} steps"

    # checkpoints: the run directory loads back to the same agent, which evaluates identically
    assert (tmp_path / "run" / RUN_FILE).is_file()
    loaded = rlf.load(tmp_path / "run")
    assert loaded.counters == algo.counters
    result = algo.evaluate(episodes=1, seed=11, max_steps=EVAL_STEPS)
    assert result["episodes"] == 1.0, result
    assert all(math.isfinite(v) for v in result.values()), result
    assert loaded.evaluate(episodes=1, seed=11, max_steps=EVAL_STEPS) == result

    # resumes: training continues from the checkpoint's counters
    loaded.train(steps=STEPS + RESUME_STEPS)
    assert loaded.counters["env_steps"] >= STEPS + RESUME_STEPS


def test_the_cli_refuses_an_incompatible_pair_in_one_line(tmp_path: Path):
    refused = [(a, e) for a, e in PAIRS if not compatible_by_metadata(a, e)]
    assert refused, "every installed algorithm fits every installed environment; nothing to refuse"
    algorithm, env = refused[0]
    rlf_cli = Path(sys.executable).parent / "rlf"
    done = subprocess.run([str(rlf_cli), "train", algorithm, "--env", env, "--steps", "16", "--no-progress",
                           "--run-dir", str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("rlf: error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.rstrip().endswith(errors[0]) and algorithm in errors[0], done.stderr

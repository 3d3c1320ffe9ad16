"""A generated corpus of checkpoints with one field made wrong: every checkpoint field is checked for type,
sign and finiteness before anything is restored. Each case edits one field of a real PPO checkpoint
(stopped mid-rollout, so it holds the envs' own state too): a NaN or infinity in any float (weights,
optimizer moments, the waiting rollout's observations and returns, an env's physics state), a count that is
negative, fractional, a boolean or a string (the trainer's, the learner's, the episode tracker's, an env's
time limit). ``rlf train --resume`` must end in one ``rlf: error:`` line naming the field, exit 2, no
traceback, and the run directory exactly as it was. Before these checks a NaN weight or env state was a
torch traceback and a negative counter resumed silently."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest
from faults import snapshot

import rlf
from rlf.cli.commands import main
from rlf.logging.callbacks import Callback
from rlf.storage import checkpoint as ckpt
from rlf.storage.run_state import COUNT_KEYS, first_bad_value

_BASE: dict[str, object] = {}


def _leaves(tree, where=""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, f"{where}.{key}" if where else str(key))
    elif isinstance(tree, list | tuple):
        for i, value in enumerate(tree):
            yield from _leaves(value, f"{where}[{i}]")
    else:
        yield where, tree


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A PPO run on CartPole stopped mid-rollout (256 of the preset's 8 x 64 steps)."""
    run = tmp_path_factory.mktemp("base") / "run"
    code = main(["train", "ppo", "--env", "gym:CartPole-v1", "--steps", "256", "--seed", "3", "--no-progress",
                 "--set", "algo.rollout_steps=64", "--run-dir", str(run)])
    assert code == 0
    state = ckpt.load(run / "checkpoint.rlf")
    assert first_bad_value(state) is None  # what rlf saves passes its own check
    _BASE.update(run=run, state=state)
    return run


# The fields, named as the error line names them. A few arrays hold many elements of one kind; the
# corpus edits one element of each array, so every tensor rlf or the plugin restores is covered.
FLOAT_ARRAYS = (
    *(f"strategy.agent.networks.agent.{net}.{layer}.{kind}" for net in ("actor", "critic") for layer in (0, 2, 4)
      for kind in ("weight", "bias")),
    *(f"strategy.learner.optimizer.state.{i}.{moment}" for i in range(12) for moment in ("exp_avg", "exp_avg_sq")),
    *(f"strategy.learner.optimizer.state.{i}.step" for i in range(0, 12, 3)),
    "strategy.inflight.obs.agent", "strategy.inflight.episodes.returns",
    *(f"strategy.inflight.envs.envs[{i}].layers[3].state.attributes.state" for i in range(8)),
)
FLOAT_SCALARS = ("strategy.learner.optimizer.param_groups[0].lr", "strategy.learner.optimizer.param_groups[0].eps",
                 "saved_at")
COUNTS = ("counters.env_steps", "counters.iterations", "counters.episodes", "strategy.learner.env_steps",
          "strategy.learner.updates", "strategy.episodes.episodes", "strategy.resets",
          "strategy.inflight.episodes.dropped",
          *(f"strategy.inflight.envs.envs[{i}].layers[0].state.elapsed_steps" for i in (0, 7)))
BAD_COUNTS = {"negative": -1, "very negative": -(2**40), "fraction": 1.5, "true": True, "string": "3"}


def _cases():
    for field in FLOAT_ARRAYS:
        yield f"nan {field}", field, "nan", None
    for field in FLOAT_ARRAYS[:12]:  # the agent's weights: what evaluation acts with
        yield f"+inf {field}", field, "inf", None
        yield f"-inf {field}", field, "-inf", None
    for field in FLOAT_SCALARS:
        for value in ("nan", "inf", "-inf"):
            yield f"{value} {field}", field, value, None
    for field in COUNTS:
        for label, value in BAD_COUNTS.items():
            if field.startswith("counters.") and label == "fraction":
                label, value = "whole float", 256.0
            yield f"{label} {field}", field, None, value


CASES = {name: (field, non_finite, count) for name, field, non_finite, count in _cases()}


def _get_parent(state, field):
    """(container, key) of ``field``: dotted keys as the error line writes them (a weight's own key,
    ``actor.0.weight``, has dots too), list indices in brackets."""
    for where, _ in _leaves(state):
        if where == field or where.startswith(field + "["):
            break
    else:
        raise AssertionError(f"{field} is not in the checkpoint")
    node, rest = state, field
    while rest:
        if rest.startswith("["):
            index, _, rest = rest[1:].partition("]")
            rest = rest.removeprefix(".")
            key = int(index)
        else:
            key = next(k for k in sorted(node, key=lambda k: -len(str(k)))
                       if rest == str(k) or rest.startswith(f"{k}.") or rest.startswith(f"{k}["))
            rest = rest[len(str(key)):].removeprefix(".")
        if not rest:
            return node, key
        node = node[key]
    raise AssertionError(field)


@pytest.mark.parametrize("case", list(CASES))
def test_a_wrong_field_is_refused_before_anything_is_restored(case, base, tmp_path, monkeypatch, capsys):
    field, non_finite, count = CASES[case]
    fixtures = tmp_path / "fixtures"
    run = fixtures / "run"
    shutil.copytree(base, run)
    state = ckpt.load(run / "checkpoint.rlf")
    parent, key = _get_parent(state, field)
    if non_finite is not None:
        value = parent[key]
        if isinstance(value, np.ndarray):
            value = value.copy()
            value.reshape(-1)[value.size // 2] = float(non_finite)
            index = np.unravel_index(value.size // 2, value.shape)
            named = field + (f"[{', '.join(str(int(i)) for i in index)}]" if value.shape else "")
            parent[key] = value
        else:
            parent[key] = float(non_finite)
            named = field
        fragment = f"has an unusable {named}"
        reason = f"{float(non_finite)} is not a finite number"
    else:
        parent[key] = count
        named, fragment = field, f"has an unusable {field}"
        reason = {int: "negative", float: "belongs", bool: "belongs", str: "belongs"}[type(count)]
        if field.startswith("counters."):  # the step counters' own check (type and sign) says it its way
            reason = "greater than or equal to 0" if isinstance(count, int) and not isinstance(count, bool) \
                else "valid integer"
    ckpt.save(run / "checkpoint.rlf", state)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    before = snapshot(cwd, fixtures)
    capsys.readouterr()
    code = main(["train", "--resume", str(run), "--steps", "512", "--no-progress"])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if not line.startswith("rlf: warning:")]
    assert code == 2 and "Traceback" not in out + err, err
    assert len(lines) == 1 and lines[0].startswith("rlf: error: checkpoint "), err
    assert fragment in lines[0] and reason in lines[0], lines[0]
    assert snapshot(cwd, fixtures) == before, "a file was created, changed or removed"


def test_the_corpus_covers_each_kind_and_is_big_enough():
    assert len(CASES) >= 130
    assert {"nan", "inf", "-inf"} <= {v for _, v, _ in CASES.values() if v}
    assert {field.rpartition(".")[2] for field in COUNTS} <= COUNT_KEYS


@pytest.mark.parametrize("value", [0.0, -0.0, 1e308, -1e308, 5e-324])
def test_extreme_but_finite_numbers_are_kept(value):
    assert first_bad_value({"strategy": {"learner": {"lr": value, "w": np.full(3, value)}}}) is None


def test_counts_elsewhere_may_be_none_and_lists_of_numbers_are_not_counts():
    assert first_bad_value({"s": {"episodes": None, "x": {"episodes": [-1.5, 2.0]}, "resets": 0}}) is None
    assert first_bad_value({"s": {"updates": -1}}) == ("s.updates", "the count -1 is negative")
    assert first_bad_value({"s": {"w": [1.0, math.inf]}}) == ("s.w[1]", "inf is not a finite number")


def test_a_learner_metric_named_like_a_count_is_a_float_in_the_trainers_metric_rows():
    rows = {"trainer": {"pending": [{"train_steps": 1.0, "loss": 0.5}], "recent": [{"episodes": 2.5}]}}
    assert first_bad_value(rows) is None
    rows["trainer"]["pending"][0]["train_steps"] = math.nan
    assert first_bad_value(rows) == ("trainer.pending[0].train_steps", "nan is not a finite number")
    assert first_bad_value({"trainer": {"env_steps": 1.0}}) == (
        "trainer.env_steps", "1.0 where a count (a whole number) belongs")


class _Crash(Exception):
    pass


class _CrashAfter(Callback):
    """The process dying between two checkpoints (a power cut, the OOM killer), as a test can make it: the
    run ends by an exception and leaves its last periodic checkpoint behind."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step(self, trainer, result) -> None:
        if trainer.counters["env_steps"] >= self.at:
            raise _Crash


def test_a_dqn_run_killed_after_a_checkpoint_between_two_metric_rows_resumes(tmp_path):
    # DQN reports its train_steps as a metric; a periodic checkpoint written between two log rows holds it
    # in the trainer's pending rows, where it once failed the count check and the run could not be resumed
    run = tmp_path / "run"
    overrides = ["log_interval=1000", "checkpoint_interval=200", "algo.min_replay_size=64", "seed=0",
                 f"run_dir={run}"]
    with pytest.raises(_Crash):
        rlf.make("dqn", "gym:CartPole-v1", overrides=overrides).train(steps=400, progress=False,
                                                                        callbacks=[_CrashAfter(300)])
    state = ckpt.load(run / "checkpoint.rlf")
    assert 200 <= state["counters"]["env_steps"] < 300
    assert any("train_steps" in row for row in state["trainer"]["pending"])
    assert main(["train", "--resume", str(run), "--steps", "400", "--no-progress"]) == 0
    assert ckpt.load(run / "checkpoint.rlf")["counters"]["env_steps"] >= 400

"""What a run checkpoint must hold, checked before any plugin code sees it, and loading its parts into
live objects with one line per part that does not fit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from rlf.errors import CheckpointError
from rlf.storage.checkpoint import short_error, to_array


class _RunSection(BaseModel):
    model_config = ConfigDict(extra="allow")
    algorithm: StrictStr
    env: StrictStr


class _Config(BaseModel):
    model_config = ConfigDict(extra="allow")
    run: _RunSection
    algo: dict[str, Any]
    env: dict[str, Any]


class _Rng(BaseModel):
    model_config = ConfigDict(extra="allow")
    python: tuple[Any, ...] | list[Any]
    numpy: dict[str, Any]


class _Strategy(BaseModel):
    model_config = ConfigDict(extra="allow")
    agent: Any
    learner: Any


class RunState(BaseModel):
    """The parts of a training checkpoint that ``rlf.load`` needs before any plugin code sees it."""

    model_config = ConfigDict(extra="allow")
    config: _Config
    counters: dict[str, Annotated[StrictInt, Field(ge=0)]]
    rng: _Rng
    strategy: _Strategy
    callbacks: dict[StrictStr, Any] | None = None
    """Callbacks' and loggers' own states by key (``Callback.state_dict``); absent before rlf saved them."""


_PARTS = {"strategy.learner": "the learner's state", "strategy.agent": "the agent's weights",
          "rng": "the RNG state", "counters": "the step counters", "config": "the run config",
          "strategy": "the agent's and learner's state", "callbacks": "the callbacks' states"}


COUNT_KEYS = frozenset({"env_steps", "iterations", "episodes", "updates", "resets", "elapsed_steps", "dropped",
                        "train_steps", "gradient_steps", "restarts"})
"""Keys that hold a count wherever they appear in a checkpoint (the trainer's, a strategy's, a learner's, an
env wrapper's): a number there is a whole number, never negative."""

METRIC_ROWS = frozenset({"trainer.pending", "trainer.recent"})
"""Where a checkpoint holds rows of reported metrics (floats by the Learner's contract, averaged when logged):
a learner may report a count there under the same name (``train_steps``: 1.0), so only finiteness is checked."""


def _part(where: str) -> str:
    return next((f" ({text})" for key, text in _PARTS.items() if where == key or where.startswith(key + ".")), "")


def validate_state(path: Path, state: Any) -> RunState:
    """The checkpoint's parts, checked before anything is restored: present and of the right type, every
    count a whole number that is not negative, every number finite (rlf never saves NaN or infinity)."""
    try:
        checked = RunState.model_validate(state)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        what = f"has no {where}{_part(where)}" if problem["type"] == "missing" else \
            f"has an unusable {where}{_part(where)}: {problem['msg'].lower()}"
        raise CheckpointError(f"checkpoint {path} {what}; it is incomplete or was not written by rlf") from None
    found = first_bad_value({key: value for key, value in state.items() if key != "config"})
    if found is not None:
        where, problem = found
        raise CheckpointError(f"checkpoint {path} has an unusable {where}{_part(where)}: {problem}; rlf never saves "
                              "one, so the file was edited or damaged") from None
    return checked


def first_bad_value(tree: Any) -> tuple[str, str] | None:
    """(where, what) of the first NaN or infinity anywhere in ``tree`` (numbers and float arrays), or of a
    count (``COUNT_KEYS``) that is not a whole number or is negative; None when there is none."""
    stack: list[tuple[str, Any, bool, bool]] = [("", tree, False, False)]
    while stack:
        where, value, count, metrics = stack.pop()
        if isinstance(value, dict):
            stack.extend((path, item, key in COUNT_KEYS and not metrics, metrics or path in METRIC_ROWS)
                         for key, item in reversed(list(value.items()))
                         for path in (f"{where}.{key}" if where else str(key),))
        elif isinstance(value, list | tuple):
            stack.extend((f"{where}[{i}]", item, False, metrics) for i, item in reversed(list(enumerate(value))))
        elif isinstance(value, np.ndarray):
            if value.dtype.kind in "fc" and not np.isfinite(value).all():
                index = np.unravel_index(int(np.flatnonzero(~np.isfinite(value))[0]), value.shape)
                at = f"[{', '.join(str(int(i)) for i in index)}]" if value.shape else ""
                return f"{where}{at}", f"{value[index]} is not a finite number"
            if count and value.shape == () and value.dtype.kind == "i" and int(value) < 0:
                return where, f"the count {int(value)} is negative"
        elif isinstance(value, bool | np.bool_):
            if count:
                return where, f"{str(bool(value)).lower()} where a count (a whole number) belongs"
        elif isinstance(value, float | np.floating):
            if not math.isfinite(value):
                return where, f"{float(value)} is not a finite number"
            if count:
                return where, f"{float(value)} where a count (a whole number) belongs"
        elif isinstance(value, int | np.integer):
            if count and value < 0:
                return where, f"the count {int(value)} is negative"
        elif count and value is not None:
            return where, f"a {type(value).__name__} where a count (a whole number) belongs"
    return None


def describe_mismatch(expected: Any, got: Any, path: str, out: list[str] | None = None,
                      shapes_only: bool = False) -> list[str]:
    """Per-tensor differences between what an object's ``state_dict()`` has and what a checkpoint holds.

    ``shapes_only``: only arrays present on both sides whose shapes differ, where the model's array is
    not empty (lists of different lengths, missing keys and dtypes are left to the target's own
    ``load_state_dict``).
    """
    out = [] if out is None else out
    want, have = to_array(expected), to_array(got)
    if want is not None or have is not None:
        if want is None or have is None:
            if not shapes_only:
                out.append(f"{path}: checkpoint {_kind(got)}, model {_kind(expected)}")
        elif shapes_only:
            # A model array that starts empty is storage that grows (a tabular agent's table), not a weight.
            if want.size and want.shape != have.shape:
                out.append(f"{path}: checkpoint {tuple(have.shape)} {have.dtype}, model {tuple(want.shape)} {want.dtype}")
        elif want.shape != have.shape or want.dtype != have.dtype:
            out.append(f"{path}: checkpoint {tuple(have.shape)} {have.dtype}, model {tuple(want.shape)} {want.dtype}")
    elif isinstance(expected, dict) and isinstance(got, dict):
        for key in expected:
            if key in got:
                describe_mismatch(expected[key], got[key], f"{path}.{key}", out, shapes_only)
            elif not shapes_only:
                out.append(f"{path}.{key}: missing from the checkpoint")
        if not shapes_only:
            out.extend(f"{path}.{key}: in the checkpoint but not in the model" for key in got if key not in expected)
    elif isinstance(expected, list | tuple) and isinstance(got, list | tuple):
        if len(expected) == len(got):
            for i, (e, g) in enumerate(zip(expected, got, strict=True)):
                describe_mismatch(e, g, f"{path}[{i}]", out, shapes_only)
        elif not shapes_only:
            out.append(f"{path}: checkpoint has {len(got)} entries, model {len(expected)}")
    elif shapes_only:
        pass
    elif type(expected) is not type(got) and not (_number(expected) and _number(got)):
        out.append(f"{path}: checkpoint {_kind(got)}, model {_kind(expected)}")
    return out


def _number(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    array = to_array(value)
    if array is not None:
        return f"array {tuple(array.shape)} {array.dtype}"
    return f"a {type(value).__name__}"


def load_into(target: Any, state: Any, name: str, check_shapes: bool = False) -> None:
    """``target.load_state_dict(state)``; a checkpoint that does not fit is one line naming each tensor.

    ``check_shapes`` compares every array's shape with the target's own ``state_dict()`` first, for
    targets whose state has fixed shapes (an agent's weights; not a learner's replay): a plugin whose
    ``load_state_dict`` accepts any shape would otherwise fail later, far from the cause.
    """
    if check_shapes:
        problems = describe_mismatch(target.state_dict(), state, name, shapes_only=True)
        if problems:
            raise _misfit(name, problems, None)
    try:
        target.load_state_dict(state)
    except (KeyError, ValueError, TypeError, RuntimeError, IndexError, AttributeError) as exc:
        try:
            problems = describe_mismatch(target.state_dict(), state, name)
        except Exception:  # noqa: BLE001 - the original error is what to report then
            problems = []
        raise _misfit(name, problems, exc) from None


def _misfit(name: str, problems: list[str], exc: BaseException | None) -> CheckpointError:
    shown = "; ".join(problems[:6]) + (f"; and {len(problems) - 6} more" if len(problems) > 6 else "")
    detail = shown or f"{type(exc).__name__}: {short_error(exc)}"
    return CheckpointError(f"the checkpoint does not fit this {name} ({detail}); it was written with another "
                           "configuration or plugin version: train with the same settings, or start a new run")

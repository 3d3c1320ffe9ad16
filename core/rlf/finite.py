"""The non-finite guard: NaN or infinity stops a run before it reaches a CSV, TensorBoard or a checkpoint.

A NaN loss is the one failure that training loops otherwise carry on through silently, overwriting
good weights with useless ones. The checks cost a dict scan per step and one pass over the float
arrays at each checkpoint, which is the moment that matters: nothing non-finite is ever saved.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from rlf.errors import NonFiniteError, PluginError


def _advice(run_dir: Path | None) -> str:
    fix = "lower the learning rate or fix the environment's rewards and observations"
    if run_dir is None or not (Path(run_dir) / "checkpoint.rlf").is_file():
        return f"{fix}, then train again"
    return f"the last good checkpoint is kept: {fix}, then continue with `rlf train --resume {run_dir}`"


def _bad(value: Any) -> bool:
    return isinstance(value, float | int | np.floating | np.integer) and not isinstance(value, bool) \
        and not math.isfinite(float(value))


def _number(value: Any) -> bool:
    return isinstance(value, float | int | np.floating | np.integer) and not isinstance(value, bool | np.bool_)


def check_step(result: Any, env_step: int, algorithm: str, run_dir: Path | None, owner: str | None = None) -> None:
    """The learner's metrics and the finished episodes' rows of one ``StepResult``. The metrics must be a
    dict of plain numbers (the Learner contract): anything else would fail later, at the next metrics row
    or checkpoint, in a traceback naming neither the plugin nor the metric. ``owner`` names the plugin."""
    metrics = result.metrics
    check_metrics(metrics, owner or f"algorithm {algorithm!r}")
    for key, value in metrics.items():
        if _bad(value):
            raise NonFiniteError(f"training stopped at env step {env_step}: the learner's metric {key!r} is "
                                 f"{float(value)} (algorithm {algorithm}); nothing non-finite was logged; "
                                 f"{_advice(run_dir)}")
    for row in result.episodes:
        for key, value in row.items():
            if _bad(value):
                raise NonFiniteError(f"training stopped at env step {env_step}: an episode's {key!r} is "
                                     f"{float(value)} (from the environment's rewards or metrics); nothing "
                                     f"non-finite was logged; {_advice(run_dir)}")


def check_metrics(metrics: Any, who: str) -> None:
    """``learn()``'s return as the Learner contract has it: a dict of plain numbers keyed by name."""
    if not isinstance(metrics, dict):
        raise PluginError(f"{who}: its learner's learn() returned {type(metrics).__name__}, not a dict of metric "
                          "name -> number; return {} when there is nothing to report")
    for key, value in metrics.items():
        if not isinstance(key, str) or not _number(value):
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise PluginError(f"{who}: its learner's learn() returned the metric {key!r} as "
                              f"{type(value).__name__} {shown}; metrics are plain numbers keyed by name "
                              "(float(loss.item()) for a tensor)")


class BadObservation(Exception):
    """An agent failed to act on observations holding NaN or infinity: the trainer, which knows the env step,
    turns it into the one-line NonFiniteError (raised below the plugin-error wrapping on purpose)."""

    def __init__(self, where: str, value: float):
        super().__init__(f"{where} is {value}")
        self.where, self.value = where, value


def act_on(agent: Any, obs: Any, explore: bool = True) -> Any:
    """``agent.act(obs)``; if it fails on observations that hold NaN or infinity, that is the cause to name
    (a policy's sampling then fails deep inside torch). Checked only on failure: no cost per step."""
    try:
        return agent.act(obs, explore=explore)
    except Exception:
        found = first_non_finite(obs, "the environment's observations")
        if found is None:
            raise
        raise BadObservation(*found) from None


def observation_error(bad: BadObservation, env_step: int, algorithm: str, run_dir: Path | None) -> NonFiniteError:
    return NonFiniteError(f"training stopped at env step {env_step}: {bad.where} is {bad.value}, which the agent "
                          f"(algorithm {algorithm}) cannot act on; nothing non-finite was logged; {_advice(run_dir)}")


def check_weights(strategy: Any, env_step: int, algorithm: str, run_dir: Path | None) -> None:
    """The learner's weights (what evaluation uses), at each log interval: cheap next to the steps between."""
    found = first_non_finite(strategy.weights(), "weights")
    if found is not None:
        where, value = found
        raise NonFiniteError(f"training stopped at env step {env_step}: {where} is {value} (algorithm {algorithm}); "
                             f"{_advice(run_dir)}")


def first_non_finite(tree: Any, path: str) -> tuple[str, float] | None:
    """(where, value) of the first NaN/inf in a state tree of arrays, tensors and numbers, else None."""
    todo = [(tree, path)]
    while todo:
        node, where = todo.pop()
        if isinstance(node, dict):
            todo.extend((v, f"{where}.{k}") for k, v in reversed(list(node.items())))
        elif isinstance(node, list | tuple):
            todo.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(node))))
        elif _bad(node):
            return where, float(node)
        else:
            array = _float_array(node)
            if array is not None and not np.isfinite(array).all():
                index = np.unravel_index(int(np.flatnonzero(~np.isfinite(array))[0]), array.shape)
                at = f"[{', '.join(str(int(i)) for i in index)}]" if array.ndim else ""
                return f"{where}{at}", float(array[index])
    return None


def _float_array(node: Any) -> np.ndarray | None:
    if isinstance(node, np.ndarray):
        return node if node.dtype.kind in "fc" else None
    if hasattr(node, "detach") and hasattr(node, "is_floating_point"):  # a torch tensor
        return node.detach().cpu().numpy() if node.is_floating_point() else None
    return None


def check_tree(tree: Any, path: str, what: str, run_dir: Path | None) -> None:
    found = first_non_finite(tree, path)
    if found is not None:
        where, value = found
        raise NonFiniteError(f"{what} was not saved: {where} is {value}; {_advice(run_dir)}")

"""Observation batches of any supported space, as one kind of value: an array, or a tree of arrays.

A batch of ``Box``/``Discrete``/``MultiBinary``/``MultiDiscrete`` observations is one (N, ...) array. A
batch of ``Dict`` observations is a dict of such arrays (key -> (N, ...)) and a batch of ``Tuple``
observations a tuple of them: Gymnasium's vector-env convention (``gymnasium.vector.utils.batch_space``).
Every place that stacks, indexes, copies or concatenates observations (collectors, rollouts, replay,
checkpoints) goes through these functions, so a plain array costs what it did before and a structured
observation works everywhere at once.

One level only: a Dict or Tuple whose parts are themselves Dict or Tuple is refused (``check_space``);
flatten the inner part in the environment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium
import numpy as np

from rlf.errors import IncompatibleError

ARRAY_SPACES = (gymnasium.spaces.Box, gymnasium.spaces.Discrete, gymnasium.spaces.MultiBinary,
                gymnasium.spaces.MultiDiscrete)
"""Spaces whose batches are one (N, ...) array."""
STRUCTURED_SPACES = (gymnasium.spaces.Dict, gymnasium.spaces.Tuple)
"""Spaces whose batches are a dict (Dict) or tuple (Tuple) of arrays, one per part."""

Observations = Any
"""np.ndarray | dict[str, np.ndarray] | tuple[np.ndarray, ...]: one batch of one agent's observations."""


def is_structured(space: gymnasium.Space) -> bool:
    return isinstance(space, STRUCTURED_SPACES)


def parts(space: gymnasium.Space) -> list[tuple[str | int, gymnasium.Space]]:
    """(key, space) of each part of a Dict (keys) or Tuple (indices), in batch order; [] for an array space."""
    if isinstance(space, gymnasium.spaces.Dict):
        return list(space.spaces.items())
    if isinstance(space, gymnasium.spaces.Tuple):
        return list(enumerate(space.spaces))
    return []


def unsupported(space: gymnasium.Space) -> str | None:
    """Why rlf cannot batch ``space`` (one clause), or None when it can."""
    if isinstance(space, ARRAY_SPACES):
        return None
    if not is_structured(space):
        return (f"{type(space).__name__} observations ({space}) are not batched by rlf (it batches Box, Discrete, "
                "MultiBinary, MultiDiscrete, and Dict or Tuple of those)")
    if not parts(space):
        return f"an empty {type(space).__name__} observation space has nothing to batch"
    for key, part in parts(space):
        if not isinstance(part, ARRAY_SPACES):
            nested = " (nested Dict/Tuple are not supported)" if is_structured(part) else ""
            return (f"part {key!r} of its {type(space).__name__} observations is {type(part).__name__}"
                    f"{nested}; rlf batches Dict and Tuple of Box, Discrete, MultiBinary, MultiDiscrete")
    return None


def check_space(space: gymnasium.Space, owner: str = "the environment") -> None:
    """Raise the one-line ``IncompatibleError`` where ``unsupported`` finds a reason."""
    why = unsupported(space)
    if why is not None:
        raise IncompatibleError(f"{owner}: {why}; wrap the env to flatten them "
                                "(gymnasium.wrappers.FlattenObservation) or choose another environment")


# -- trees of arrays ---------------------------------------------------------------------------------
def tree_map(fn: Callable[..., Any], tree: Observations, *rest: Observations) -> Observations:
    """``fn`` applied to every array of ``tree`` (with the arrays at the same place in ``rest``), in the
    same structure. An array (or anything not a dict or tuple) is its own one leaf."""
    if isinstance(tree, dict):
        return {key: fn(value, *(other[key] for other in rest)) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(fn(value, *(other[i] for other in rest)) for i, value in enumerate(tree))
    return fn(tree, *rest)


def leaves(tree: Observations) -> Iterator[tuple[str, np.ndarray]]:
    """(path suffix, array) of every array: ``("", array)`` for a plain one, ``(".image", ...)`` or
    ``("[0]", ...)`` for parts, so error messages name them as ``first_non_finite`` does."""
    if isinstance(tree, dict):
        yield from ((f".{key}", value) for key, value in tree.items())
    elif isinstance(tree, tuple):
        yield from ((f"[{i}]", value) for i, value in enumerate(tree))
    else:
        yield "", tree


def rows(tree: Observations) -> int:
    """The batch size (leading axis) of a batch."""
    for _, array in leaves(tree):
        return len(array)
    return 0


def stack(batches: Sequence[Observations]) -> Observations:
    """(T, N, ...) from T batches of (N, ...)."""
    first = batches[0]
    if isinstance(first, dict | tuple):
        return tree_map(lambda *arrays: np.stack(arrays), *batches)
    return np.stack(batches)


def concatenate(batches: Sequence[Observations]) -> Observations:
    """One batch of all rows of ``batches``, in order."""
    first = batches[0]
    if isinstance(first, dict | tuple):
        return tree_map(lambda *arrays: np.concatenate(arrays), *batches)
    return np.concatenate(batches)


def index(tree: Observations, where: Any) -> Observations:
    """``array[where]`` of every array (a row, a slice, a mask or index array)."""
    if isinstance(tree, dict | tuple):
        return tree_map(lambda array: array[where], tree)
    return tree[where]


def assign(tree: Observations, where: Any, value: Observations) -> None:
    """``array[where] = value`` for every array, in place."""
    if isinstance(tree, dict | tuple):
        tree_map(lambda array, part: array.__setitem__(where, part), tree, value)
    else:
        tree[where] = value


def copy(tree: Observations) -> Observations:
    """A copy that owns its memory (``np.array(..., copy=True)`` of every array)."""
    if isinstance(tree, dict | tuple):
        return tree_map(lambda array: np.array(array, copy=True), tree)
    return np.array(tree, copy=True)


def unstack(tree: Observations) -> list[Observations]:
    """The T batches of a (T, ...) stack: the inverse of ``stack``."""
    return [index(tree, t) for t in range(rows(tree))]


def merge_rows(tree: Observations, axes: int = 2) -> Observations:
    """Every array's first ``axes`` axes merged into one: a rollout's (T, N, ...) to (T * N, ...)."""
    return tree_map(lambda array: array.reshape(-1, *array.shape[axes:]), tree)


def empty(space: gymnasium.Space, n: int, dtypes: Any = None) -> Observations:
    """A zero batch of ``n`` observations of ``space`` (Gymnasium's ``create_empty_array``); ``dtypes``, a
    function of a part's space, overrides the dtype each array is stored in."""
    if dtypes is None:
        return gymnasium.vector.utils.create_empty_array(space, n, fn=np.zeros)
    if is_structured(space):
        made = {key: empty(part, n, dtypes) for key, part in parts(space)}
        return made if isinstance(space, gymnasium.spaces.Dict) else tuple(made[i] for i in range(len(made)))
    return np.zeros((n, *(space.shape or ())), dtype=dtypes(space))


def fits(space: gymnasium.Space, tree: Any, n: int) -> str | None:
    """None when ``tree`` is a batch of ``n`` observations of ``space`` (structure, shapes, dtypes that cast
    safely), else what it is instead: for checking observations read back from a checkpoint."""
    if is_structured(space):
        expected = parts(space)
        if isinstance(space, gymnasium.spaces.Dict):
            if not isinstance(tree, dict) or list(tree) != [key for key, _ in expected]:
                got = sorted(tree) if isinstance(tree, dict) else type(tree).__name__
                return f"parts {got}, these envs give {[key for key, _ in expected]}"
        elif not isinstance(tree, tuple | list) or len(tree) != len(expected):
            return f"a {type(tree).__name__}, these envs give a tuple of {len(expected)}"
        for key, part in expected:
            problem = fits(part, tree[key], n)
            if problem is not None:
                return f"part {key!r}: {problem}"
        return None
    array = np.asarray(tree)
    want = (n, *(space.shape or ()))
    if array.shape != want or array.dtype.hasobject or (
            space.dtype is not None and not np.can_cast(array.dtype, space.dtype, "same_kind")):
        return f"{array.shape} {array.dtype}, these envs give {want} {space.dtype}"
    return None


def restore(space: gymnasium.Space, tree: Any) -> Observations:
    """A checked batch (``fits``) in the structure the collectors hand out (a list read back as a tuple)."""
    if isinstance(space, gymnasium.spaces.Tuple):
        return tuple(np.asarray(value) for value in tree)
    if isinstance(space, gymnasium.spaces.Dict):
        return {key: np.asarray(tree[key]) for key, _ in parts(space)}
    return np.asarray(tree)

"""The env state protocol's building blocks: the protocol itself, the adapter registry, and how
generators and values become checkpointable data. ``rlf.envs.state`` (which re-exports all of it) walks
envs and vectors of envs with them. ``gymnasium_adapters`` registers its adapters here, so ``rlf.envs.state``
imports it at load time without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlf.interfaces import StateTree


class StateUnavailable(Exception):
    """The envs cannot save or restore their state; the message says why (one clause, no period)."""


@runtime_checkable
class StatefulEnv(Protocol):
    """An environment that can say its state (see the module docstring)."""

    def get_state(self) -> StateTree: ...

    def set_state(self, state: StateTree) -> None: ...


@dataclass(frozen=True)
class StateAdapter:
    """``get(layer)`` and ``set(layer, state)`` for one class whose code cannot offer the protocol."""

    get: Callable[[Any], StateTree]
    set: Callable[[Any, StateTree], None]


ADAPTERS: dict[str, StateAdapter] = {}
"""The state adapters by exact env class (``module.QualName``), filled by ``register_state_adapter``."""


def register_state_adapter(class_path: str, get: Callable[[Any], StateTree],
                           set: Callable[[Any, StateTree], None]) -> None:  # noqa: A002 - the protocol's name
    """Save and restore instances of exactly the class ``class_path`` (``"module.QualName"``)."""
    ADAPTERS[class_path] = StateAdapter(get, set)


def class_path(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def has_own_protocol(obj: Any) -> bool:
    return callable(getattr(type(obj), "get_state", None)) and callable(getattr(type(obj), "set_state", None))


# -- numpy generators as JSON ----------------------------------------------------------------------

_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")
"""Bit generators a state may name: looked up in numpy.random by these names only."""


def generator_state(generator: np.random.Generator | None) -> StateTree | None:
    """A numpy Generator's exact position as JSON-able data (None stays None: not created yet)."""
    return None if generator is None else generator.bit_generator.state


def generator_from_state(state: StateTree | None) -> np.random.Generator | None:
    """A Generator at the position ``generator_state`` saved."""
    if state is None:
        return None
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        raise StateUnavailable(f"the saved random generator {name!r} is not one of {', '.join(_BIT_GENERATORS)}")
    bit_generator = getattr(np.random, name)()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


# -- values: numpy scalars keep their dtype ----------------------------------------------------------

def pack(value: Any) -> Any:
    """An attribute's value as checkpointable data; numpy scalars keep their dtype (a float32 scalar
    restored as a Python float would change the arithmetic that follows)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, np.generic):
        return {"scalar": np.asarray(value)}
    if isinstance(value, tuple):
        return tuple(pack(v) for v in value)
    if isinstance(value, list):
        return [pack(v) for v in value]
    raise StateUnavailable(f"a value of type {type(value).__name__} cannot be saved as env state")


def unpack(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"scalar"}:
        return np.asarray(value["scalar"])[()]
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple):
        return tuple(unpack(v) for v in value)
    if isinstance(value, list):
        return [unpack(v) for v in value]
    return value

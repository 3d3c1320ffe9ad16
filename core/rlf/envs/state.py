"""The optional env state protocol: what lets a resumed run continue its in-flight episodes exactly.

An environment that can say its state offers two methods::

    def get_state(self) -> StateTree: ...        # JSON-able data and numpy arrays, never objects
    def set_state(self, state: StateTree) -> None: ...

``set_state`` on a freshly built copy (same config) must make it behave, step for step, exactly as
the env that ``get_state`` was called on: positions, counters, the episode's fixed layout and the
env's random generator (``generator_state``/``generator_from_state`` below turn a numpy
``Generator`` into JSON and back). The state goes into the checkpoint's JSON and ``.npy`` members, under the checkpoint
reader's caps, so a checkpoint still never holds code.

Envs that cannot change their own code (Gymnasium's) are covered by *state adapters*, keyed by the
exact class (``module.qualname``; a subclass may add state, so it is not covered): a Gymnasium env
is a chain of wrappers around an unwrapped env, and its state is the state of every layer. A layer
with its own ``get_state``/``set_state`` covers itself and everything it wraps; any other layer
needs an adapter, or the env has no state to offer. Adapters for the wrappers ``gymnasium.make``
adds and for the classic-control envs live in ``gymnasium_adapters.py`` (they read Gymnasium's private
attributes); another package can add its own with ``register_state_adapter``.

Nothing here is needed for training: a run whose envs lack the protocol resumes with fresh episodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# the adapters for Gymnasium's own classes register on import (importing them imports no Gymnasium)
from rlf.envs import gymnasium_adapters  # noqa: F401
from rlf.envs.state_protocol import (
    ADAPTERS,
    StateAdapter,
    StatefulEnv,
    StateUnavailable,
    class_path,
    generator_from_state,
    generator_state,
    has_own_protocol,
    pack,
    register_state_adapter,
    unpack,
)
from rlf.interfaces import StateTree

__all__ = [
    "ADAPTERS", "StateAdapter", "StateUnavailable", "StatefulEnv", "class_path", "generator_from_state", "generator_state",
    "get_env_state", "has_own_protocol", "pack", "register_state_adapter", "restore_vector", "set_env_state",
    "set_env_states", "unpack", "vector_state",
]


# -- whole envs: a chain of layers ------------------------------------------------------------------

def _layers(env: Any) -> list[Any]:
    """The env, then what it wraps, down to the first layer that covers the rest itself."""
    layers = [env]
    while not has_own_protocol(layers[-1]) and class_path(layers[-1]) in ADAPTERS:
        inner = getattr(layers[-1], "env", None)
        if inner is None or inner is layers[-1]:
            break
        layers.append(inner)
    return layers


def get_env_state(env: Any) -> StateTree:
    """The state of one env (every layer of a wrapped one); raises StateUnavailable naming the layer
    that can neither say its state itself nor has an adapter."""
    saved = []
    for layer in _layers(env):
        path = class_path(layer)
        if has_own_protocol(layer):
            saved.append({"class": path, "state": layer.get_state()})
            break
        adapter = ADAPTERS.get(path)
        if adapter is None:
            raise StateUnavailable(f"{path} has no get_state/set_state (and no state adapter)")
        saved.append({"class": path, "state": adapter.get(layer)})
    return {"layers": saved}


def set_env_state(env: Any, state: StateTree) -> None:
    """Put a freshly built env into a saved state (checked to fit before anything is changed)."""
    set_env_states([env], [state])


def set_env_states(envs: Sequence[Any], states: Sequence[StateTree]) -> None:
    """Restore every env, or none: the layer chains are compared with the saved ones first."""
    if not isinstance(states, list | tuple) or len(states) != len(envs):
        count = len(states) if isinstance(states, list | tuple) else "no"
        raise StateUnavailable(f"the checkpoint holds {count} env states for {len(envs)} envs")
    plans = []
    for env, state in zip(envs, states, strict=True):
        layers = _layers(env)
        saved = state.get("layers") if isinstance(state, dict) else None
        have = [class_path(layer) for layer in layers]
        want = [entry.get("class") if isinstance(entry, dict) else None for entry in saved or []]
        if have != want:
            raise StateUnavailable(f"the saved env state is for {' > '.join(map(str, want)) or 'nothing'}, "
                                   f"the env is now {' > '.join(have)}")
        plans.append((layers, saved))
    for layers, saved in plans:
        for layer, entry in zip(layers, saved, strict=True):
            if has_own_protocol(layer):
                layer.set_state(entry["state"])
            else:
                ADAPTERS[class_path(layer)].set(layer, entry["state"])


# -- vectors of envs (what a strategy holds) --------------------------------------------------------

def vector_state(envs: Any) -> StateTree:
    """The state of every env copy a collector holds; raises StateUnavailable when it cannot say it."""
    get = getattr(envs, "get_state", None)
    if get is None:
        raise StateUnavailable(f"the collector's {type(envs).__name__} has no get_state")
    return get()


def restore_vector(envs: Any, state: StateTree) -> None:
    set_ = getattr(envs, "set_state", None)
    if set_ is None:
        raise StateUnavailable(f"the collector's {type(envs).__name__} has no set_state")
    set_(state)

"""State adapters for Gymnasium's own classes: the wrappers ``gymnasium.make`` adds (TimeLimit,
OrderEnforcing, PassiveEnvChecker) and the classic-control envs, so that their runs resume their
episodes exactly (``state.py`` has the protocol).

These read and write Gymnasium's *private* attributes (``_elapsed_steps``, ``_np_random``, the
classic-control envs' ``state``): they are correct for the Gymnasium versions the core's dependency
range allows (``pyproject.toml`` pins below the next minor) and tests/reliability/test_exact_resume.py
is their oracle. A Gymnasium release that renames one makes that test fail, not a run silently diverge.
Registered on import, by class name: importing this imports no Gymnasium code.
"""

from __future__ import annotations

from typing import Any

from rlf.envs.state_protocol import (
    ADAPTERS,
    StateAdapter,
    generator_from_state,
    generator_state,
    pack,
    unpack,
)
from rlf.interfaces import StateTree


def _time_limit_get(layer: Any) -> StateTree:
    return {"elapsed_steps": layer._elapsed_steps}


def _time_limit_set(layer: Any, state: StateTree) -> None:
    layer._elapsed_steps = state["elapsed_steps"]


def _order_get(layer: Any) -> StateTree:
    return {"has_reset": layer._has_reset}


def _order_set(layer: Any, state: StateTree) -> None:
    layer._has_reset = bool(state["has_reset"])


_CHECKS = ("checked_reset", "checked_step", "checked_render", "close_called")


def _checker_get(layer: Any) -> StateTree:
    return {name: bool(getattr(layer, name)) for name in _CHECKS}


def _checker_set(layer: Any, state: StateTree) -> None:
    # The checker only warns. Its first-step and data-reuse checks compare with the observation
    # the reset returned, which is not saved: a restored checker counts them as done (same results).
    for name in _CHECKS:
        setattr(layer, name, bool(state[name]))
    layer.checked_step = layer.checked_step or layer.checked_reset
    layer.checked_data_reuse = layer.checked_step
    layer._previous_data = None


def _classic(*attributes: str) -> StateAdapter:
    """An unwrapped Gymnasium env whose dynamics live in ``attributes`` plus its ``np_random``."""

    def get(env: Any) -> StateTree:
        return {"attributes": {name: pack(getattr(env, name)) for name in attributes},
                "np_random": generator_state(env._np_random), "np_random_seed": env._np_random_seed}

    def set_(env: Any, state: StateTree) -> None:
        for name in attributes:
            setattr(env, name, unpack(state["attributes"][name]))
        env._np_random = generator_from_state(state["np_random"])
        env._np_random_seed = state["np_random_seed"]

    return StateAdapter(get, set_)


_CLASSIC_CONTROL = {
    # every attribute step() or reset() assigns that a later step reads (render-only state aside,
    # except Pendulum's last_u, which render() draws)
    "cartpole.CartPoleEnv": ("state", "steps_beyond_terminated"),
    "mountain_car.MountainCarEnv": ("state",),
    "continuous_mountain_car.Continuous_MountainCarEnv": ("state",),
    "acrobot.AcrobotEnv": ("state",),
    "pendulum.PendulumEnv": ("state", "last_u"),
}

for _name, _get, _set in (("TimeLimit", _time_limit_get, _time_limit_set),
                          ("OrderEnforcing", _order_get, _order_set),
                          ("PassiveEnvChecker", _checker_get, _checker_set)):
    ADAPTERS.setdefault(f"gymnasium.wrappers.common.{_name}", StateAdapter(_get, _set))
for _name, _attributes in _CLASSIC_CONTROL.items():
    ADAPTERS.setdefault(f"gymnasium.envs.classic_control.{_name}", _classic(*_attributes))

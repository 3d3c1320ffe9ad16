"""The core's own environment plugin: ``gym:<id>`` for any registered Gymnasium id.

It is registered through the same hooks a third-party plugin uses.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import Field

from rlf.config import EnvConfig
from rlf.errors import ConfigError


class GymEnvConfig(EnvConfig):
    """A Gymnasium environment by registered id."""

    id: str = Field("CartPole-v1", min_length=1,
                    description="Gymnasium id; taken from gym:<id> (gym:<module>:<id> imports the module first).")
    max_episode_steps: int | None = Field(None, ge=1, description="Override the id's time limit.")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments for gymnasium.make.")


def make_gym_env(config: GymEnvConfig, render_mode: str | None = None):
    import gymnasium

    module, _, registered = config.id.rpartition(":")
    if module:
        # "module:Id-v0", as gymnasium.make reads it: the module registers the id when imported
        import importlib

        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ConfigError(f"gym:{config.id}: module {module!r} cannot be imported ({exc}); install the package "
                              "that registers the id, or use a registered id") from None
    if registered not in gymnasium.registry:
        close = difflib.get_close_matches(registered, list(gymnasium.registry), n=1)
        hint = f"did you mean gym:{close[0]}? " if close else ""
        raise ConfigError(f"gymnasium has no environment {config.id!r}: {hint}"
                          "use a registered id (python -c 'import gymnasium; gymnasium.pprint_registry()')")
    kwargs = dict(config.kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        return gymnasium.make(config.id, max_episode_steps=config.max_episode_steps, **kwargs)
    except gymnasium.error.DependencyNotInstalled as exc:
        detail = str(exc).splitlines()[0] if str(exc) else "a dependency is missing"
        raise ConfigError(f"gym:{config.id} needs an extra Gymnasium dependency ({detail}); install it, e.g. "
                          f"pip install \"gymnasium[{_extra_of(config.id)}]\"") from None
    except (TypeError, ValueError, AttributeError, AssertionError, gymnasium.error.Error) as exc:
        if not config.kwargs:  # nothing the user passed: a genuine failure of the env, keep its traceback
            raise
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise ConfigError(f"env.kwargs {config.kwargs!r} do not fit gym:{config.id} ({detail}); "
                          "fix or drop env.kwargs") from None


def _extra_of(env_id: str) -> str:
    """The Gymnasium extra that provides an id's dependencies (box2d, mujoco, atari...)."""
    import gymnasium

    entry = str(gymnasium.registry[env_id].entry_point) if env_id in gymnasium.registry else ""
    for extra in ("box2d", "mujoco", "toy_text", "classic_control", "atari"):
        if extra in entry:
            return extra
    return "all"

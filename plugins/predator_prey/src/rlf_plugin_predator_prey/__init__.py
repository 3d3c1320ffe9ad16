"""rlf-plugin-predator-prey: predators and prey on a grid, as a PettingZoo parallel env.

Names load on first use, so plugin discovery (which imports ``.plugin``, hence this package) stays
free of gymnasium and pettingzoo.
"""

from importlib import import_module

_LAZY = {
    "SCENARIOS": "config", "PredatorPreyConfig": "config", "RewardConfig": "config",
    "ObservationEncoder": "encoding", "layout": "encoding",
    "ACTION_NAMES": "env", "PredatorPreyEnv": "env", "make_env": "env", "parallel_env": "env",
    "random_play": "baseline", "capture_summary": "baseline",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
    globals()[name] = value
    return value


__all__ = sorted(_LAZY)

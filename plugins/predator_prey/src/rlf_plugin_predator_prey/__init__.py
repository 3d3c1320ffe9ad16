"""rlf-plugin-predator-prey: predators and prey on a grid, as a PettingZoo parallel env.

Names load on first use, so plugin discovery (which imports ``.plugin``, hence this package) stays
free of gymnasium and pettingzoo.
"""

from rlf.lazy import lazy_exports

_LAZY = {
    "SCENARIOS": "config", "PredatorPreyConfig": "config", "RewardConfig": "config",
    "ObservationEncoder": "encoding", "layout": "encoding",
    "ACTION_NAMES": "env", "PredatorPreyEnv": "env", "make_env": "env", "parallel_env": "env",
    "random_play": "baseline", "capture_summary": "baseline",
}

__getattr__ = lazy_exports(__name__, _LAZY)
__all__ = sorted(_LAZY)

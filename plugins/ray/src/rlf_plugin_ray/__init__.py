"""rlf-plugin-ray: environment copies hosted by Ray actors, placed anywhere in a Ray cluster.

Names load on first use: discovery imports ``rlf_plugin_ray.plugin``, and with it this package,
so importing Ray here (about a second) would slow every `rlf` command.
"""

__all__ = ["RayCollectorConfig", "RayVector", "build_collector"]


def __getattr__(name: str):
    if name == "RayCollectorConfig":
        from .config import RayCollectorConfig

        return RayCollectorConfig
    if name in ("RayVector", "build_collector"):
        from . import collector

        return getattr(collector, name)
    raise AttributeError(f"module 'rlf_plugin_ray' has no attribute {name!r}")

"""Entry point: registers the ``ray`` collector. Imports stay light: Ray loads when a run uses it."""

from rlf import hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_collectors(register):
    from .config import RayCollectorConfig

    register("ray", build_collector="rlf_plugin_ray.collector:build_collector", config=RayCollectorConfig,
             description="env copies on Ray actors, anywhere in a Ray cluster (local, auto, ray://...)")

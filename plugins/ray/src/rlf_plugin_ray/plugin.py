"""Entry point: registers the ``ray`` collector (and its off-policy actor pool) and the ``ray`` tune launcher. Imports stay light: Ray loads when a run uses it."""

from rlf import hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_collectors(register):
    from .config import RayCollectorConfig

    register("ray", build_collector="rlf_plugin_ray.collector:build_collector", config=RayCollectorConfig,
             build_actor_pool="rlf_plugin_ray.actors:build_actor_pool",
             description="env copies, and off-policy actors (algo.actors), on Ray actors anywhere in a Ray "
                         "cluster (local, auto, ray://...)")


@hookimpl
def rlf_register_tune_launchers(register):
    register("ray", launch="rlf_plugin_ray.tune:launch", check="rlf_plugin_ray.tune:check",
             description="rlf tune's --jobs workers as Ray tasks on a Ray cluster (--address local, auto, "
                         "ray://...; a remote one needs --storage with a shared database)")

"""The core's own collectors, ``sync`` and ``async``, registered through the same hook a third-party
collector (Ray, another engine) uses. Builders are named by string so discovery never imports
Gymnasium."""

from __future__ import annotations

from .hookspecs import RegisterCollector, hookimpl
from .plugins import API_VERSION

RLF_API_VERSION = API_VERSION


@hookimpl
def rlf_register_collectors(register: RegisterCollector):
    register("sync", build_collector="rlf.envs:build_sync_collector",
             description="every env copy in this process, stepped in turn")
    register("async", build_collector="rlf.envs:build_async_collector",
             description="one subprocess per env copy (shared memory), in two groups that step in turn")

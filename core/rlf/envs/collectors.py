"""The core's collectors (``sync``, ``async``) and the check every collector's builder passes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlf.envs.base import EnvFactory, VectorEnv, probe_of
from rlf.envs.gym_vector import GymVector
from rlf.envs.pettingzoo import ParallelVector
from rlf.envs.workers import DEFAULT_WORKER_NICE, Supervision


def make_vector_env(name: str, factory: EnvFactory, num_envs: int, subprocess: bool,
                    supervision: Supervision | None = None, worker_nice: int = DEFAULT_WORKER_NICE) -> VectorEnv:
    if probe_of(factory, name).multi_agent:
        return ParallelVector(name, factory, num_envs)
    return GymVector(name, factory, num_envs, subprocess, supervision, worker_nice)


def build_sync_collector(env_name: str, factory: EnvFactory, num_envs: int, config: Any = None) -> VectorEnv:
    """The built-in ``sync`` collector: every env copy in this process."""
    return make_vector_env(env_name, factory, num_envs, subprocess=False)


def build_async_collector(env_name: str, factory: EnvFactory, num_envs: int, config: Any = None) -> VectorEnv:
    """The built-in ``async`` collector: one subprocess per env copy (PettingZoo envs stay in-process)."""
    nice = DEFAULT_WORKER_NICE if config is None else config.worker_nice
    return make_vector_env(env_name, factory, num_envs, subprocess=True, worker_nice=nice)


_CONTRACT = ("spec", "num_envs", "parts", "reset", "step", "close")


@dataclass
class Collector:
    """The collector ``run.vector`` selected, bound to its validated ``[collector]`` settings.

    Strategies call it for the envs they step; it checks what a third-party builder returned, so a
    collector that breaks the contract fails at setup with its name, not deep inside a rollout.
    """

    name: str
    build_collector: Callable[..., Any]
    config: Any = None
    build_actor_pool: Callable[..., Any] | None = None
    """Where the off-policy strategy's actors (``algo.actors > 0``) run when this collector is selected:
    ``build_actor_pool(job, config) -> rlf.training.actors.ActorPool``; None: forked local processes."""
    plugin: str = "rlf"
    """The plugin that registered it, named when its builder fails."""

    def __call__(self, env_name: str, factory: EnvFactory, num_envs: int) -> VectorEnv:
        from rlf.errors import PluginRunError, guarded

        envs = guarded(self.plugin, f"collector {self.name!r} (its builder)", self.build_collector, env_name, factory,
                       num_envs, self.config)
        missing = [attribute for attribute in _CONTRACT if not hasattr(envs, attribute)]
        if missing:
            close = getattr(envs, "close", None)
            if callable(close):
                close()
            raise PluginRunError(f"plugin {self.plugin!r} failed in collector {self.name!r} (its builder): "
                                 f"collector {self.name!r} returned {type(envs).__name__}, which lacks "
                                 f"{', '.join(missing)} of rlf.VectorEnv; fix the collector's plugin")
        if envs.num_envs != num_envs:
            envs.close()
            raise PluginRunError(f"plugin {self.plugin!r} failed in collector {self.name!r} (its builder): it built "
                                 f"{envs.num_envs} envs where {num_envs} were asked for; fix the collector's plugin")
        return envs


SYNC = Collector("sync", build_sync_collector)
"""In-process envs: what evaluation and worker processes step, whatever the run's collector."""

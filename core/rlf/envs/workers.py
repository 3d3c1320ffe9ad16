"""Env worker processes: how they start (a fork server that imports the env's module once), their
priority, and how they are supervised (timeouts, restarts, how a lost worker is described).
"""

from __future__ import annotations

import base64
import hashlib
import multiprocessing
import os
import pickle
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlf.envs.base import EnvFactory, EnvProbe
from rlf.interfaces import SINGLE_AGENT

PIPELINE_PARTS = 2
"""Subprocess envs are started as this many groups, so one group steps while the next actions of
another are computed (see ``VectorEnv.parts``)."""


def worker_context(factory: EnvFactory) -> str:
    """The multiprocessing start method for env workers: ``forkserver`` where the platform has it.

    A spawned worker is a fresh interpreter that imports rlf, gymnasium and the env's module itself:
    eight Mario workers did that eight times over, most of a run's start-up (benchmarks/mario_startup.py).
    The fork server imports them once (it is a clean interpreter, started without torch or threads,
    so forking it is safe) and forks each worker from there. Preloading is best effort: a module
    that fails to import there is simply imported by the worker, as under spawn.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    global _server_key
    if _server_key is None:
        # the first call starts the server: what it preloads (and prebuilds) is fixed from then on
        module = _builder_module(factory)
        preload = ["rlf.envs.gym_vector", *([module] if module else [])]
        payload = _template_payload(factory)
        if payload is not None:
            preload.append("rlf.envs.fork_template")
            os.environ[_fork_template_variable()] = payload
        multiprocessing.set_forkserver_preload(preload)
        from multiprocessing import forkserver

        try:
            forkserver.ensure_running()
        finally:
            os.environ.pop(_fork_template_variable(), None)
        _server_key = payload.partition(":")[0] if payload is not None else ""
    return "forkserver"


_server_key: str | None = None
"""None until this process started its fork server; then the key of the env template it holds ("": none)."""


def _fork_template_variable() -> str:
    from rlf.envs.fork_template import VARIABLE

    return VARIABLE


def _builder_target(factory: Any) -> Any:
    builder = getattr(factory, "build_env", None)
    return getattr(builder, "target", builder)  # a LazyCallable ("module:function") or the function


def _builder_module(factory: Any) -> str | None:
    reference = getattr(getattr(factory, "build_env", None), "reference", None)
    module = reference.partition(":")[0] if isinstance(reference, str) else getattr(_builder_target(factory),
                                                                                     "__module__", None)
    return module if module and module != "__main__" else None


def _factory_key(factory: Any) -> tuple[str, bytes] | None:
    try:
        data = pickle.dumps(factory)
    except Exception:  # not picklable here: the workers get it by cloudpickle, and build it themselves
        return None
    return hashlib.sha256(data).hexdigest(), data


def _template_payload(factory: Any) -> str | None:
    """What the fork server needs to prebuild ``factory``'s env, if its builder asks for it
    (``fork_template = True`` on the builder function: see rlf.envs.fork_template)."""
    if not getattr(_builder_target(factory), "fork_template", False):
        return None
    keyed = _factory_key(factory)
    if keyed is None:
        return None
    return keyed[0] + ":" + base64.b64encode(keyed[1]).decode()


def template_key(factory: Any) -> str | None:
    """The key under which this process's fork server holds ``factory``'s env template, or None."""
    if not _server_key:
        return None
    keyed = _factory_key(factory)
    return keyed[0] if keyed is not None and keyed[0] == _server_key else None


def prestart_workers(factory: EnvFactory) -> None:
    """Start the fork server (``worker_context``) now, without waiting for it: its interpreter start,
    imports and env template then overlap whatever this process does before it asks for the first
    worker. Nothing if the platform has no fork server."""
    worker_context(factory)


class _ProbedEnv:
    """Stands in for the env Gymnasium's ``AsyncVectorEnv`` builds in the main process only to read
    its spaces and metadata: those come from the factory's probe instead of another build."""

    def __init__(self, probe: EnvProbe):
        self.metadata = dict(probe.metadata)
        self.render_mode = probe.render_mode
        self.observation_space = probe.spec.observation_spaces[SINGLE_AGENT]
        self.action_space = probe.spec.action_spaces[SINGLE_AGENT]

    def close(self) -> None:
        pass


class WorkerEnvFn:
    """An env builder for ``AsyncVectorEnv``: in the main process (where Gymnasium calls it once, for
    the spaces) it answers with the probe; pickled to a worker, it builds the real env."""

    def __init__(self, factory: Callable[[], Any], probe: EnvProbe | None, template: str | None = None):
        self.factory = factory
        self.probe = probe
        self.template = template
        """The key of the fork server's prebuilt copy of this env, if it holds one (``template_key``)."""

    def __getstate__(self) -> dict[str, Any]:
        return {"factory": self.factory, "probe": None, "template": self.template}

    def __call__(self) -> Any:
        global _worker_env
        if self.probe is not None:
            return _ProbedEnv(self.probe)
        env = None
        if self.template is not None:
            from rlf.envs import fork_template as _fork_template

            env = _fork_template.take(self.template)
        _worker_env = self.factory() if env is None else env
        return _worker_env


STATE_COMMAND = "rlf-state"
"""The one command an env worker knows beside Gymnasium's: ``(STATE_COMMAND, None)`` answers the env's
state (``rlf.envs.state``), ``(STATE_COMMAND, state)`` sets it; the answer is ``{"state": ...}``, or
``{"unavailable": why}``, never an exception (one would end Gymnasium's worker loop)."""

_worker_env: Any = None
"""In an env worker process: its env (each worker holds one)."""


def env_worker(index: int, env_fn: Any, pipe: Any, parent_pipe: Any, *rest: Any) -> None:
    """An env worker process: Gymnasium's own, with ``STATE_COMMAND`` answered on the way in."""
    from gymnasium.vector.async_vector_env import _async_worker

    # A Ctrl-C in a terminal reaches every process of the group; the training process finishes its step
    # (the workers' answers included) before it stops, then closes the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _async_worker(index, env_fn, _StatePipe(pipe), parent_pipe, *rest)


class _StatePipe:
    """The worker's end of its pipe, as Gymnasium's worker reads it, answering ``STATE_COMMAND`` itself."""

    def __init__(self, pipe: Any):
        self._pipe = pipe

    def recv(self) -> Any:
        while True:
            message = self._pipe.recv()
            if not (isinstance(message, tuple) and len(message) == 2 and message[0] == STATE_COMMAND):
                return message
            self._pipe.send((_answer_state(message[1]), True))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipe, name)


def _answer_state(state: Any) -> dict[str, Any]:
    from rlf.envs.state import StateUnavailable, get_env_state, set_env_state

    try:
        if _worker_env is None:
            return {"unavailable": "the env worker holds no env"}
        if state is None:
            return {"state": get_env_state(_worker_env)}
        set_env_state(_worker_env, state)
        return {"state": None}
    except Exception as exc:  # noqa: BLE001 - StateUnavailable, or an env's own get_state/set_state failing
        return {"unavailable": str(exc) if isinstance(exc, StateUnavailable) else f"{type(exc).__name__}: {exc}"}


DEFAULT_WORKER_NICE = 0
"""Env worker processes run at the training process's own priority by default (``collector.worker_nice``
adds to it). Measured on Mario, 8 async workers on 2 cores (benchmarks/worker_nice.py, 2026-12-03): alone,
0 gave 119.8 env steps/s, 2 gave 111.3 and 19 112.7; beside two busy programs 0 and 2 gave 83 and 19 gave
0 (niceness 19 weighs 1.5 % of a nice-0 process in Linux's scheduler, so other programs starve it). A
lower priority was meant to let the process that acts for the workers take a core at once; it bought
nothing measurable."""


def deprioritize(pids: list[int], niceness: int = DEFAULT_WORKER_NICE) -> None:
    """Lower the env workers' CPU priority (``collector.worker_nice``) so the learner is not starved."""
    if niceness <= 0:
        return
    try:
        target = os.getpriority(os.PRIO_PROCESS, 0) + niceness
        for pid in pids:
            os.setpriority(os.PRIO_PROCESS, pid, min(target, 19))
    except (AttributeError, OSError):  # no priorities on this platform, or not allowed: keep the default
        pass


@dataclass(frozen=True)
class Supervision:
    """How subprocess env workers are watched (``run.env_timeout``, ``run.env_restarts``)."""

    timeout: float = 60.0
    """Seconds a worker may take to answer one reset or step before it counts as hung. A worker
    that dies is noticed at once (its pipe closes), whatever this is."""
    restarts: int = 0
    """Dead or hung workers replaced in this process before the run stops with an error."""


RESTART_SEED_STRIDE = 104_729
"""Seed distance between a worker's incarnations: a restarted env never replays an episode this run
already began (more than any vector of envs, seeds seed..seed+num_envs-1, spans)."""


WORKER_LOST = (EOFError, BrokenPipeError, ConnectionResetError, multiprocessing.TimeoutError)
"""What Gymnasium's AsyncVectorEnv raises when a worker process is gone or silent."""


def exit_description(exitcode: int) -> str:
    """How a child process ended, for error lines: 'was killed by signal SIGKILL', 'exited with code 3'."""
    if exitcode < 0:
        try:
            return f"was killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"

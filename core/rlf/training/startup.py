"""Start-up: the agent and learner built in a background thread while the envs start, a plugin's
builder failures as one line, and supervision settings handed to whatever envs were built.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any

from rlf.envs.base import VectorEnv
from rlf.envs.workers import Supervision
from rlf.errors import RlfError, guarded, plugin_failure
from rlf.interfaces import BuildContext


class BackgroundBuild:
    """``build_agent`` then ``build_learner`` in a thread, in the order ``setup`` builds them in (the
    global RNG streams they draw from, and the weights, are those of a build in the main thread). The
    agent can be taken as soon as it is built, the learner later."""

    def __init__(self, algorithm: Any, context: BuildContext):
        self.spec = context.env_spec
        self.context = context
        self.algorithm = algorithm
        self.built_agent: Any = None
        self.built_learner: Any = None
        self._error: BaseException | None = None
        self._threads: int | None = None
        self._agent_done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlf-build-agent", daemon=False)
        _PENDING.add(self)
        self._thread.start()

    def _run(self) -> None:
        try:
            try:
                self.built_agent = self.algorithm.build_agent(self.context)
                torch = sys.modules.get("torch")
                if torch is not None:
                    self._threads = torch.get_num_threads()
            finally:
                self._agent_done.set()
            self.built_learner = self.algorithm.build_learner(self.context, self.built_agent)
        except BaseException as exc:  # handed to the main thread by agent() / learner()
            self._error = exc
        finally:
            _PENDING.discard(self)

    def wait(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def agent(self) -> Any:
        """The agent once built; the build's exception, raised here."""
        self._agent_done.wait()
        if self.built_agent is None:
            self.wait()
            raise _as_plugin_error(self.algorithm, "build_agent", self._error)
        torch = sys.modules.get("torch")
        if self._threads is not None and torch is not None and torch.get_num_threads() != self._threads:
            # torch's intra-op thread count is per thread (OpenMP): what the builder chose for acting
            # must hold in the thread that acts
            torch.set_num_threads(self._threads)
        return self.built_agent

    def learner(self) -> Any:
        """The learner once built; the build's exception, raised here."""
        self.wait()
        if self._error is not None:
            raise _as_plugin_error(self.algorithm, "build_learner", self._error)
        return self.built_learner


_PENDING: weakref.WeakSet[BackgroundBuild] = weakref.WeakSet()
"""Builds whose thread is still running."""


BUILD_WAIT_S = 60.0
"""How long a failed setup waits for the agent being built in the background before it reports."""


def plugin_call(algorithm: Any, hook: str, fn: Any, *args: Any) -> Any:
    """An algorithm plugin's builder or learner call: its failure is one line naming the plugin and hook."""
    return guarded(getattr(algorithm, "plugin", "?"), f"algorithm {getattr(algorithm, 'name', '?')!r} {hook}", fn,
                   *args)


def learn_call(algorithm: Any, learn: Any, batch: Any) -> dict[str, float]:
    """``learner.learn(batch)`` through ``plugin_call``, its return checked against the Learner contract
    (a dict of plain numbers) where the strategy first uses it, naming the plugin."""
    from rlf.finite import check_metrics

    metrics = plugin_call(algorithm, "learn()", learn, batch)
    check_metrics(metrics, f"plugin {getattr(algorithm, 'plugin', '?')!r} (algorithm {getattr(algorithm, 'name', '?')!r})")
    return metrics


def _as_plugin_error(algorithm: Any, hook: str, error: BaseException) -> BaseException:
    if isinstance(error, RlfError | KeyboardInterrupt) or not isinstance(error, Exception | SystemExit):
        return error
    failure = plugin_failure(getattr(algorithm, "plugin", "?"), f"algorithm {getattr(algorithm, 'name', '?')!r} "
                             f"{hook}", error)
    failure.__cause__ = error
    return failure


def _finish_pending_builds() -> None:
    """Before this process forks (A3C's workers, off-policy actors): a build half done in another
    thread would be copied half done, and its thread not at all."""
    for build in list(_PENDING):
        build.wait()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_pending_builds)


def supervise(envs: VectorEnv, run: Any, algorithm: Any, restarts_used: int = 0) -> None:
    """Give envs the run's worker supervision settings, the restarts already used (before a resume;
    set before the first reset, which may need one) and the name errors about actions should blame.

    Set on whatever was built (any collector), so env workers are watched however envs are made."""
    if hasattr(envs, "supervision"):
        envs.supervision = Supervision(run.env_timeout, run.env_restarts)
    if restarts_used and hasattr(envs, "restarts"):
        envs.restarts = restarts_used
    envs.acting = f"algorithm {algorithm.name!r} (plugin {algorithm.plugin})"

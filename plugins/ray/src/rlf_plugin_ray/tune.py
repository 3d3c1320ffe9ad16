"""The ``ray`` tune launcher: ``rlf tune --jobs N --launcher ray [--address ADDRESS]`` runs the study's N
worker loops as Ray tasks, on the cluster the ``ray`` collector would join (same addresses, same checks).

Each task runs rlf tune's own worker loop (``job.run_worker(index)``: the same objective, pruning, seeds
and run directories as a local worker process), so it writes its trials' run directories on the node
where it runs. All of them share the study through its storage: the default SQLite file under
--study-dir is visible only to the tasks of this machine (address local or auto), so a remote address
needs --storage with a database every node reaches (checked before anything starts).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pydantic import ValidationError

from rlf.errors import ConfigError, RlfError

from .config import RayCollectorConfig

if TYPE_CHECKING:
    from rlf.tune import TuneJob

ON_THIS_MACHINE = ("local", "auto")
POLL_S = 2.0


class TuneWorkerFailed(RlfError):
    """A worker task stopped with an error that is not the user's input (its trial's error is shown)."""

    exit_code = 1


def address_of(job: TuneJob) -> str:
    """``--address``, else $RAY_ADDRESS, else local (as ``collector.address`` resolves)."""
    return job.address or os.environ.get("RAY_ADDRESS") or "local"


def _config(job: TuneJob) -> RayCollectorConfig:
    address = address_of(job)
    try:
        return RayCollectorConfig(address=address)
    except ValidationError:
        raise ConfigError(f"--address {address!r} must be local, auto, ray://HOST:10001 or HOST:PORT (a Ray "
                          "cluster's GCS); unset, $RAY_ADDRESS or local") from None


def check(job: TuneJob) -> None:
    """Before the study opens: the address's form, and a storage every task can reach."""
    config = _config(job)
    if config.address not in ON_THIS_MACHINE and job.default_storage:
        raise ConfigError(
            f"--launcher ray --address {config.address}: the study's storage {job.storage_url} is a SQLite file "
            "that only this machine sees, and the tasks run on the cluster's nodes; pass --storage with a database "
            "URL every node can reach, e.g. postgresql://user:password@host/db or mysql://user:password@host/db "
            "(or run on this machine with --address local)")


def launch(job: TuneJob) -> None:
    """``job.workers`` tasks, each one worker loop; returns when all are done (the first error stops it)."""
    import ray

    from . import collector

    config = _config(job)
    try:
        owns = collector.connect(config, cpus_needed=job.workers)
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("collector.address=", "--address ", 1)) from None
    task = ray.remote(num_cpus=1, max_retries=0)(_run_worker)
    pending = [task.options(name=f"rlf-tune-{index}").remote(job, index) for index in range(job.workers)]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)
            for ref in done:
                _result(ray, ref)
            job.poll()
    except BaseException:
        for ref in pending:  # Ctrl-C or a failed worker: the others stop (their trials are recovered on resume)
            try:
                ray.cancel(ref, force=False)
            except Exception:  # noqa: BLE001 - stopping must not hide the error being raised
                pass
        raise
    finally:
        if owns and ray.is_initialized():
            ray.shutdown()


def _run_worker(job: TuneJob, index: int) -> None:
    job.run_worker(index)


def _result(ray, ref) -> None:
    """A finished task's error as the CLI reports it: the user's (an RlfError, e.g. an unknown --metric) as
    it was raised, anything else as one line that keeps the study."""
    from ray.exceptions import RayTaskError, WorkerCrashedError

    try:
        ray.get(ref)
    except RayTaskError as exc:
        cause = exc.cause if isinstance(exc.cause, BaseException) else None
        if isinstance(cause, RlfError):
            raise cause from None
        text = " ".join(str(cause or exc).split())[:500]
        raise TuneWorkerFailed(f"a tune worker task failed ({type(cause or exc).__name__}: {text}); the study "
                               "is kept: run the same command to resume") from None
    except WorkerCrashedError as exc:
        raise TuneWorkerFailed(f"a tune worker task's process died ({' '.join(str(exc).split())[:200]}); the "
                               "study is kept: run the same command to resume") from None

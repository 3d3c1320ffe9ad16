"""Helpers of the APPO tests: a collector whose actor pool runs in this process and hands its actors
the learner's weights a fixed number of pushes late (stale chunks on demand, deterministic), and
small run helpers."""

from __future__ import annotations

import csv
from pathlib import Path

from rlf import hookimpl
from rlf.envs.collectors import build_sync_collector
from rlf.plugins import load_registry
from rlf.training.actors import ActorJob, ActorWorker


class LaggingPool:
    """An ``ActorPool`` with every actor in this process, taking turns; each chunk is acted with the
    weights pushed ``lag`` pushes before the latest (``lag`` = 0: the latest)."""

    lag = 0
    instances: list[LaggingPool] = []

    def __init__(self, job: ActorJob, config=None):
        self.workers = [ActorWorker(job, seed) for seed in job.seeds]
        for worker in self.workers:
            worker.load(job.weights)
        self.pushed = [job.weights]
        self.turn = 0
        self.restarts = 0
        self.closed = False
        LaggingPool.instances.append(self)

    def push(self, weights):
        self.pushed.append(weights)

    def collect(self):
        index = self.turn
        self.turn = (self.turn + 1) % len(self.workers)
        worker = self.workers[index]
        worker.load(self.pushed[max(0, len(self.pushed) - 1 - self.lag)])
        return index, worker.chunk()

    def close(self):
        self.closed = True
        for worker in self.workers:
            worker.close()


class LaggingCollectorPlugin:
    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_collectors(self, register):
        register("lagging", build_collector=build_sync_collector, build_actor_pool=LaggingPool,
                 description="tests: in-process actors on late weights")


def lagging_registry():
    return load_registry(extra_plugins=[("lagging", LaggingCollectorPlugin())])


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def returns(run_dir: Path) -> list[float]:
    return [float(row["return"]) for row in read_rows(run_dir / "episodes.csv")]

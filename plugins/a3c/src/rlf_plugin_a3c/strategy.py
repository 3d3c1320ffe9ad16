"""A3C's strategy family, ``async-workers``: on-policy rollouts collected and learned from by worker
processes that update one shared model (Hogwild-style), registered through rlf's strategy hook.

With ``async_workers > 0`` each worker process owns its own envs and seed and runs the very same
rollout + learn as the core's on-policy strategy, on a model the learner placed in shared memory; the
Trainer in the main process still owns the budget, checkpoints and stats, and this strategy relays the
workers' reports. Workers claim their env steps from the budget before collecting them, so together
they do exactly the steps the Trainer counts, and they stop by themselves when it is spent. With
``async_workers = 0`` it is the core's synchronous on-policy strategy.

This lived in the core's on-policy strategy behind an A3C-only setting; it needs a learner built for
it (a model in shared memory, ``worker_init`` in each process), so it belongs to the plugin whose
learner is. Another plugin can use it by depending on rlf-plugin-a3c and naming
``family="async-workers"`` with a config that extends ``AsyncWorkersConfig``.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
import traceback

import rlf
from rlf.envs import exit_description
from rlf.errors import EnvWorkerError
from rlf.training.actors import StopFlag

from .config import AsyncWorkersConfig

__all__ = ["AsyncWorkersConfig", "AsyncWorkersStrategy"]


class AsyncWorkersStrategy(rlf.OnPolicyStrategy):
    family = "async-workers"

    def setup(self) -> None:
        super().setup()
        self.workers: list[mp.Process] = []
        if self.context.config.async_workers:
            self._start_workers(self.context.config.async_workers)

    def step(self, limit: int) -> rlf.StepResult:
        if self.workers:
            return self._step_async(limit)
        return super().step(limit)

    def _start_workers(self, count: int) -> None:
        ctx = mp.get_context("fork")  # workers inherit the learner's shared-memory model
        self.reports = ctx.Queue(maxsize=4 * count)
        self.stop_event = StopFlag(ctx)
        # Workers claim env steps from this allowance before each rollout, so all of them together
        # collect (and learn from) exactly the budget the Trainer asks for, not a queue's worth more.
        self.allowance = ctx.Value("q", 0)
        self.budget_granted = ctx.Event()
        self._next_health_check = 0.0
        # each worker stamps time.monotonic() (one clock for all processes) here as it makes progress
        self.heartbeats = ctx.Array("d", [time.monotonic()] * count, lock=False)
        base_seed = self.context.run.seed + 7919 * self._reset_count
        for index in range(count):
            process = ctx.Process(target=_async_worker, name=f"rlf-worker-{index}", daemon=True,
                                  args=(self, index, base_seed + 1000 * (index + 1)))
            process.start()
            self.workers.append(process)

    def _step_async(self, limit: int) -> rlf.StepResult:
        if not self.budget_granted.is_set():
            # The first limit is the whole remaining budget; later limits only count it down.
            with self.allowance.get_lock():
                self.allowance.value = limit
            self.budget_granted.set()
        while True:
            if time.monotonic() >= self._next_health_check:
                # Also while reports flow: the other workers keep reporting after one of them died.
                self._check_workers()
                self._next_health_check = time.monotonic() + 1.0
            try:
                kind, payload = self.reports.get(timeout=1.0)
            except queue.Empty:
                if not any(p.is_alive() for p in self.workers):
                    self._check_workers()
                    raise EnvWorkerError("async workers all stopped before the step budget was spent") from None
                continue
            if kind == "error":
                index, summary, details = payload
                raise RuntimeError(f"async worker {index} failed: {summary}\n--- worker traceback ---\n{details}")
            steps, metrics, episodes = payload
            for row in episodes:  # renumber: every worker counts its own episodes
                self.tracker.episodes += 1
                row["episode"] = float(self.tracker.episodes)
            return rlf.StepResult(steps, metrics, episodes)

    def _check_workers(self) -> None:
        """A worker that died (a native crash, the out-of-memory killer, ``kill -9``) or made no
        progress for ``run.env_timeout`` seconds stops the run with one line (``EnvWorkerError``).

        Workers are not replaced: they share one report queue, which a process killed while
        writing to it can leave unusable for the others; the last checkpoint resumes the run."""
        timeout = self.context.run.env_timeout
        now = time.monotonic()
        for index, process in enumerate(self.workers):
            if process.exitcode not in (0, None):
                problem = exit_description(process.exitcode)
            elif process.exitcode is None and now - self.heartbeats[index] > timeout:
                process.kill()  # stopped or stuck: it would never answer the stop request
                problem = f"made no progress for {timeout:g} s (run.env_timeout)"
            else:
                continue
            raise EnvWorkerError(f"async worker {index} of {self.context.run.algorithm} on {self.env_name} "
                                 f"(pid {process.pid}) {problem}; lost workers are not replaced")

    def _drain_reports(self) -> None:
        try:
            while True:
                self.reports.get_nowait()
        except (queue.Empty, OSError, ValueError):
            pass

    def teardown(self) -> None:
        workers = getattr(self, "workers", [])
        if workers:
            self.stop_event.set()
            deadline = time.monotonic() + 10.0
            for process in workers:
                # A worker exits only once what it queued is read, so keep reading while waiting.
                while process.is_alive() and time.monotonic() < deadline:
                    self._drain_reports()
                    process.join(timeout=0.05)
            for process in workers:
                if process.is_alive():
                    process.terminate()
                    process.join(timeout=5)
            self._drain_reports()
            self.reports.close()
            self.workers = []
        super().teardown()


def _claim_steps(strategy: AsyncWorkersStrategy, num_envs: int, index: int) -> int:
    """Steps per env this worker may collect next; 0 once the budget is spent or training stops."""
    while not strategy.budget_granted.wait(timeout=0.2):
        strategy.heartbeats[index] = time.monotonic()  # waiting on the main process is no hang
        if strategy.stop_event.is_set():
            return 0
    strategy.heartbeats[index] = time.monotonic()
    if strategy.stop_event.is_set():
        return 0
    with strategy.allowance.get_lock():
        take = min(strategy.context.config.rollout_steps * num_envs, strategy.allowance.value)
        strategy.allowance.value -= take
    return -(-take // num_envs)


def _send(strategy: AsyncWorkersStrategy, item: tuple, index: int) -> bool:
    while not strategy.stop_event.is_set():
        strategy.heartbeats[index] = time.monotonic()
        try:
            strategy.reports.put(item, timeout=0.2)
            return True
        except queue.Full:
            continue
    return False


def _async_worker(strategy: AsyncWorkersStrategy, index: int, seed: int) -> None:
    """One worker: its own in-process envs and seed, the shared learner, reports to the main process.

    ``context.seed`` is set to this worker's seed before ``learner.worker_init()``, so a learner that
    kept its BuildContext can seed its own random streams differently in every worker.
    """
    try:
        strategy.context.seed = seed
        strategy.learner.worker_init()
        run = strategy.context.run
        envs = rlf.make_vector_env(strategy.env_name, strategy.env_factory, run.num_envs, subprocess=False)
        tracker = rlf.EpisodeTracker(envs.spec.agent_ids, envs.num_envs, envs.spec.multi_agent)
        obs = envs.reset(seed=seed)
        config = strategy.context.config
        try:
            while steps := _claim_steps(strategy, envs.num_envs, index):
                rollout, obs, episodes = rlf.collect_rollout(envs, strategy.agent, obs, steps, tracker,
                                                             config.gamma, config.gae_lambda, strategy.algorithm)
                metrics = strategy.learner.learn(rollout)
                if not _send(strategy, ("report", (rollout.num_steps, metrics, episodes)), index):
                    break
        finally:
            envs.close()
    except Exception as exc:  # noqa: BLE001 - reported to the main process, which raises it
        _send(strategy, ("error", (index, f"{type(exc).__name__}: {exc}", traceback.format_exc())), index)
    if strategy.stop_event.is_set():
        strategy.reports.cancel_join_thread()  # nobody will read what is still buffered

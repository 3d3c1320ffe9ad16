"""A single-agent Gymnasium env, vectorized: in this process or in supervised worker processes."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from rlf import observations as obs_tree
from rlf.envs.base import (
    EnvFactory,
    StepBatch,
    VectorEnv,
    describe_env,
    episode_metrics_of,
    final_info_of,
    probe_of,
)
from rlf.envs.inprocess import InProcessVectorEnv
from rlf.envs.state import StateUnavailable, get_env_state, set_env_states
from rlf.envs.workers import (
    DEFAULT_WORKER_NICE,
    PIPELINE_PARTS,
    RESTART_SEED_STRIDE,
    STATE_COMMAND,
    WORKER_LOST,
    Supervision,
    WorkerEnvFn,
    deprioritize,
    env_worker,
    exit_description,
    template_key,
    worker_context,
)
from rlf.errors import EnvWorkerError
from rlf.interfaces import SINGLE_AGENT, AgentArrays, StateTree


class GymVector(VectorEnv):
    """A single-agent Gymnasium env, vectorized, as the one agent id ``"agent"``.

    In-process: one ``InProcessVectorEnv``. In subprocesses: ``PIPELINE_PARTS`` Gymnasium
    ``AsyncVectorEnv`` groups (shared memory, forked from a fork server: ``worker_context``), seeded as one vector (env ``i`` gets ``seed + i``).

    Subprocess workers are supervised: every wait on them is bounded by ``supervision.timeout`` and a
    closed pipe is turned into an ``EnvWorkerError`` naming the env, the worker and how it ended. With
    ``supervision.restarts`` left, only the failed worker is killed and a new process takes its slot
    (and shared-memory row) instead: its env begins a new episode, the interrupted one is reported as
    ``dropped`` and the restart counted in ``restarts``; the group's other workers go on untouched.
    Gymnasium's AsyncVectorEnv starts the workers and owns their shared memory, but commands and
    answers go through each worker's pipe here: its ``step_wait`` reads a group as one, and a lost
    worker would take its siblings' answers with it.
    """

    def __init__(self, name: str, factory: EnvFactory, num_envs: int, subprocess: bool,
                 supervision: Supervision | None = None, worker_nice: int = DEFAULT_WORKER_NICE):
        self.name = name
        self.worker_nice = worker_nice
        self.num_envs = num_envs
        self.factory = factory
        self.supervision = supervision or Supervision()
        self.restarts = 0
        self._stopping = False
        """A worker was lost for good: close kills the other workers rather than waiting on them."""
        self._seed: int | None = None
        if subprocess:
            count = min(PIPELINE_PARTS, num_envs)
            sizes = [num_envs // count + (1 if i < num_envs % count else 0) for i in range(count)]
            self.groups = self._start_groups(sizes)
        else:
            sizes = [num_envs]
            self.groups = [InProcessVectorEnv([factory] * num_envs)]
        starts = np.cumsum([0, *sizes]).tolist()
        self._parts = [slice(start, stop) for start, stop in zip(starts, starts[1:], strict=False)]
        self._alive = [{SINGLE_AGENT: np.ones(size, dtype=bool)} for size in sizes]
        self._pending_actions: list[np.ndarray | None] = [None] * len(self.groups)
        self._stepping = [False] * len(self.groups)
        """Per group: a step was sent to its workers and their answers not read yet."""
        self._spliced: list[dict[int, gymnasium.vector.AsyncVectorEnv]] = [{} for _ in self.groups]
        """Per group: worker index -> the one-env vector whose process replaced it (see _start_worker)."""
        first = self.groups[0]
        if isinstance(first, InProcessVectorEnv):
            self.spec = describe_env(name, first.envs[0], num_envs)
        elif isinstance(factory, EnvFactory):
            self.spec = factory.describe(name, num_envs)
        else:
            self.spec = replace(probe_of(factory, name).spec, name=name, num_envs=num_envs)

    def _start_groups(self, sizes: list[int]) -> list[gymnasium.vector.AsyncVectorEnv]:
        """The groups, started at once: Gymnasium's constructor returns only when its workers have built
        their envs, so one thread per group lets all workers build together rather than group by group."""
        probe_of(self.factory, self.name)  # once, here, rather than in each thread
        worker_context(self.factory)  # the fork server too (it reads os.environ as it starts)
        if len(sizes) == 1:
            return [self._start_group(sizes[0])]
        with ThreadPoolExecutor(len(sizes), thread_name_prefix="rlf-env-group") as pool:
            futures = [pool.submit(self._start_group, size) for size in sizes]
        groups, errors = [], []
        for future in futures:
            try:
                groups.append(future.result())
            except BaseException as exc:
                errors.append(exc)
        if errors:
            for group in groups:
                self._kill(group)
            raise errors[0]
        return groups

    def _start_group(self, size: int) -> gymnasium.vector.AsyncVectorEnv:
        context = worker_context(self.factory)
        env_fn = WorkerEnvFn(self.factory, probe_of(self.factory, self.name),
                              template_key(self.factory) if context == "forkserver" else None)
        try:
            group = gymnasium.vector.AsyncVectorEnv([env_fn] * size, shared_memory=True,
                                                    autoreset_mode=AutoresetMode.SAME_STEP,
                                                    context=context, worker=env_worker)
        except WORKER_LOST as exc:  # Gymnasium waits on each new worker without a timeout
            raise EnvWorkerError(f"env workers of {self.name} died while starting ({type(exc).__name__}); "
                                 "check that the environment can be built in a fresh process") from None
        deprioritize([process.pid for process in group.processes], self.worker_nice)
        return group

    @property
    def parts(self) -> list[slice]:
        return self._parts

    @property
    def in_process(self) -> bool:
        return isinstance(self.groups[0], InProcessVectorEnv)

    def render(self):
        return self.groups[0].envs[0].render() if self.in_process else self.groups[0].render()

    @property
    def render_fps(self) -> int | None:
        return self.groups[0].metadata.get("render_fps")

    def record_final_frames(self) -> None:
        if not self.in_process:
            raise ValueError("recording needs in-process envs")
        self.groups[0].record_final_frames = True

    def reset(self, seed: int | None = None) -> AgentArrays:
        self._seed = seed
        if self.in_process:
            return {SINGLE_AGENT: self.groups[0].reset(seed=seed)[0]}
        for index, group in enumerate(self.groups):
            start = self._parts[index].start
            for i in range(len(group.parent_pipes)):
                self._command(index, i, ("reset", {"seed": None if seed is None else seed + start + i}))
        observations = []
        for index in range(len(self.groups)):
            _, lost = self._receive(index)
            self._restart_lost(index, lost, "reset")
            observations.append(self._slot_observations(index))
        return {SINGLE_AGENT: observations[0] if len(observations) == 1 else obs_tree.concatenate(observations)}

    def _command(self, part: int, worker: int, message: tuple) -> None:
        """Send one worker a command; a worker that is gone is noticed when its answer is awaited."""
        pipe = self.groups[part].parent_pipes[worker]
        try:
            pipe.send(message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def step(self, actions: AgentArrays) -> StepBatch:
        self._check_actions(actions, self.num_envs)
        if self.in_process:
            return self._batch(0, *self.groups[0].step(actions[SINGLE_AGENT]))
        chosen = actions[SINGLE_AGENT]
        for index, part in enumerate(self._parts):
            self._send(index, chosen[part])
        return StepBatch.concat([self.step_wait(index) for index in range(len(self.groups))])

    def step_async(self, part: int, actions: AgentArrays) -> None:
        self._check_actions(actions, self._parts[part].stop - self._parts[part].start)
        if self.in_process:
            self._pending_actions[part] = actions[SINGLE_AGENT]
        else:
            self._send(part, actions[SINGLE_AGENT])

    def _send(self, part: int, actions: np.ndarray) -> None:
        # Gymnasium's step_async/step_wait treat a group as one: a lost worker loses its siblings'
        # answers too. Talking to each worker's pipe (the same messages) lets one worker be replaced.
        group = self.groups[part]
        self._stepping[part] = True
        for i, action in enumerate(gymnasium.vector.utils.iterate(group.action_space, actions)):
            self._command(part, i, ("step", action))

    def step_wait(self, part: int) -> StepBatch:
        group = self.groups[part]
        if self.in_process:
            return self._batch(part, *group.step(self._pending_actions[part]))
        results, lost = self._receive(part)
        self._stepping[part] = False
        size = len(results)
        rewards = np.zeros(size, dtype=np.float64)
        terminated = np.zeros(size, dtype=bool)
        truncated = np.zeros(size, dtype=bool)
        infos: dict[str, Any] = {}
        for i, result in enumerate(results):
            if result is None:
                continue
            _, rewards[i], terminated[i], truncated[i], info = result
            if "final_obs" in info:
                if not infos:
                    infos = {"final_obs": np.full(size, None, dtype=object), "final_info": [None] * size}
                infos["final_obs"][i] = info["final_obs"]
                infos["final_info"][i] = info.get("final_info")
        self._restart_lost(part, lost, "step")
        batch = self._batch(part, self._slot_observations(part), rewards, terminated, truncated, infos)
        if lost:
            batch = self._drop(batch, sorted(lost))
        return batch

    def _receive(self, part: int) -> tuple[list[Any], dict[int, BaseException]]:
        """Every worker's answer to the last command, ``None`` for the lost ones (listed with why).

        One deadline for the whole group: a worker that has not answered ``supervision.timeout``
        seconds after the wait began counts as hung. An exception inside the env is raised as is, as
        Gymnasium would (it is the env's bug, not a lost worker)."""
        group = self.groups[part]
        deadline = time.monotonic() + self.supervision.timeout
        results: list[Any] = []
        lost: dict[int, BaseException] = {}
        for i, pipe in enumerate(group.parent_pipes):
            try:
                if not pipe.poll(max(deadline - time.monotonic(), 0.0)):
                    raise multiprocessing.TimeoutError()
                result, success = pipe.recv()
            except (*WORKER_LOST, OSError) as exc:
                results.append(None)
                lost[i] = exc
                continue
            if not success:
                self._raise_env_error(part, i)
            results.append(result)
        return results, lost

    def _restart_lost(self, part: int, lost: dict[int, BaseException], during: str) -> None:
        """Replace each lost worker by a new process on the same slot and reset its env, or raise
        ``EnvWorkerError`` once ``supervision.restarts`` are spent."""
        for i, exc in sorted(lost.items()):
            what = self._diagnose(part, i, exc)
            self._kill_worker(self.groups[part], i)
            if self.restarts >= self.supervision.restarts:
                self._stopping = True
                hint = ("raise run.env_restarts to replace lost workers and go on" if self.supervision.restarts
                        else "set run.env_restarts=N to replace lost workers and go on")
                spent = f" after {self.restarts} restart(s)" if self.supervision.restarts else ""
                raise EnvWorkerError(f"env worker {what} during {during}{spent}; {hint}")
            self.restarts += 1
            self._start_worker(part, i)

    def _start_worker(self, part: int, i: int) -> None:
        """A new process for worker ``i`` of group ``part``, reset to a fresh episode (from a seed no
        earlier episode of this run used).

        Gymnasium cannot add a worker to a running group (nor hands out the group's shared memory),
        so the replacement is a one-env AsyncVectorEnv of its own, spliced into the slot: its process
        and pipe take the lost worker's place and its observation row is copied into the group's."""
        group = self.groups[part]
        old = self._spliced[part].pop(i, None)
        if old is not None:
            self._kill(old)
        try:
            vector = self._start_group(1)
        except EnvWorkerError:
            self._stopping = True
            raise
        self._spliced[part][i] = vector
        group.processes[i], group.parent_pipes[i] = vector.processes[0], vector.parent_pipes[0]
        seed = None if self._seed is None else (
            self._seed + self._parts[part].start + i + RESTART_SEED_STRIDE * self.restarts)
        self._command(part, i, ("reset", {"seed": seed}))
        pipe = vector.parent_pipes[0]
        try:
            if not pipe.poll(self.supervision.timeout):
                raise multiprocessing.TimeoutError()
            _, success = pipe.recv()
        except (*WORKER_LOST, OSError) as exc:
            self._stopping = True
            raise EnvWorkerError(f"the restarted env worker {self._diagnose(part, i, exc)} during its first "
                                 "reset; check that the environment can be built in a fresh process") from None
        if not success:
            self._raise_env_error(part, i)

    def _raise_env_error(self, part: int, i: int) -> None:
        """Raise the exception worker ``i``'s env raised, as Gymnasium would: the env's own bug."""
        self._stopping = True
        owner = self._spliced[part].get(i, self.groups[part])
        _, kind, value, _ = owner.error_queue.get(timeout=self.supervision.timeout)
        raise kind(value)

    def _slot_observations(self, part: int) -> np.ndarray:
        """Group ``part``'s observations (from shared memory), replaced workers' rows included."""
        obs = obs_tree.copy(self.groups[part].observations)
        for i, vector in self._spliced[part].items():
            obs_tree.assign(obs, i, obs_tree.index(vector.observations, 0))
        return obs

    def _diagnose(self, part: int, i: int, exc: BaseException) -> str:
        """'<index> of <env> (pid N) was killed by signal SIGKILL' for a lost worker."""
        process, index = self.groups[part].processes[i], self._parts[part].start + i
        if isinstance(exc, multiprocessing.TimeoutError):
            return (f"{index} of {self.name} (pid {process.pid}) did not answer within "
                    f"{self.supervision.timeout:g} s (run.env_timeout)")
        deadline = time.monotonic() + 2.0  # a closed pipe can be seen just before the exit status
        while process.exitcode is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if process.exitcode is not None:
            return f"{index} of {self.name} (pid {process.pid}) {exit_description(process.exitcode)}"
        return f"{index} of {self.name} (pid {process.pid}) closed its pipe ({type(exc).__name__})"

    @staticmethod
    def _kill_worker(group: gymnasium.vector.AsyncVectorEnv, i: int) -> None:
        process, pipe = group.processes[i], group.parent_pipes[i]
        if process.exitcode is None:
            process.kill()  # SIGKILL also ends a stopped (SIGSTOP) worker, which SIGTERM would not
        process.join(timeout=5)
        if pipe is not None:
            pipe.close()

    @staticmethod
    def _kill(group: gymnasium.vector.AsyncVectorEnv) -> None:
        """Stop a group whose state is unknown without waiting on it."""
        for process in group.processes:
            if process.exitcode is None:
                process.kill()
        for process in group.processes:
            process.join(timeout=5)
        for pipe in group.parent_pipes:
            if pipe is not None:
                pipe.close()
        group.error_queue.cancel_join_thread()
        group.closed = True

    @staticmethod
    def _drop(batch: StepBatch, lost: list[int]) -> StepBatch:
        """The lost workers' envs in ``batch`` as ended, not alive and dropped (see ``StepBatch.dropped``)."""
        alive = batch.alive[SINGLE_AGENT].copy()
        alive[lost] = False
        ended = batch.episode_ended.copy()
        ended[lost] = True
        return replace(batch, alive={SINGLE_AGENT: alive},
                       episode_ended=ended, ended_envs=np.flatnonzero(ended).tolist(),
                       episode_metrics={i: m for i, m in batch.episode_metrics.items() if i not in lost},
                       dropped=tuple(lost))

    def _batch(self, part: int, obs, rewards, terminated, truncated, infos) -> StepBatch:
        """One group's step as a StepBatch over that group's envs (indices from 0)."""
        ended = terminated | truncated
        ended_envs = np.flatnonzero(ended).tolist()
        next_obs = obs
        metrics: dict[int, dict[str, float]] = {}
        if ended_envs:
            next_obs = obs_tree.copy(obs)
            for i in ended_envs:
                obs_tree.assign(next_obs, i, infos["final_obs"][i])
                found = episode_metrics_of(final_info_of(infos, i))
                if found:
                    metrics[i] = found
        frames = infos.get("final_frame")
        reward_matrix = rewards.astype(np.float32)[None]
        return StepBatch({SINGLE_AGENT: obs}, {SINGLE_AGENT: next_obs}, {SINGLE_AGENT: reward_matrix[0]},
                         {SINGLE_AGENT: terminated}, {SINGLE_AGENT: truncated}, self._alive[part], ended,
                         ended_envs, reward_matrix, metrics,
                         {i: f for i, f in enumerate(frames) if f is not None} if frames else None)

    def get_state(self) -> StateTree:
        """Every env's state (``rlf.envs.state``) in one format whether the envs run here or in worker
        processes (which answer ``STATE_COMMAND``), so a run may resume with the other collector."""
        if self.in_process:
            envs = [get_env_state(env) for env in self.groups[0].envs]
        else:
            envs = [answer["state"] for answer in self._ask_workers(lambda index: None)]
        return {"envs": envs, "seed": self._seed}

    def set_state(self, state: StateTree) -> None:
        envs = state["envs"]
        if self.in_process:
            set_env_states(self.groups[0].envs, envs)
        else:
            if not isinstance(envs, list | tuple) or len(envs) != self.num_envs:
                count = len(envs) if isinstance(envs, list | tuple) else "no"
                raise StateUnavailable(f"the checkpoint holds {count} env states for {self.num_envs} envs")
            self._ask_workers(lambda index: envs[index])
        seed = state.get("seed")
        self._seed = None if seed is None else int(seed)

    def _ask_workers(self, message: Any) -> list[dict[str, Any]]:
        """Each worker's answer to ``(STATE_COMMAND, message(env index))``, in env order; StateUnavailable
        with the first reason a worker gave, or naming a worker that was lost meanwhile (the next step
        notices it as usual)."""
        if any(self._stepping):  # their answers come first in the pipes: the state would be misread
            raise StateUnavailable("the env workers were stopped in the middle of a step")
        for index, group in enumerate(self.groups):
            start = self._parts[index].start
            for i in range(len(group.parent_pipes)):
                self._command(index, i, (STATE_COMMAND, message(start + i)))
        answers: list[dict[str, Any]] = []
        silent: list[str] = []
        for index in range(len(self.groups)):  # every group read to the end: no answer is left in a pipe
            results, lost = self._receive(index)
            for i in sorted(lost):
                # a late answer must never be read as a step's: the next step finds the worker lost
                self._kill_worker(self.groups[index], i)
                silent.append(f"env worker {self._parts[index].start + i} did not answer ({type(lost[i]).__name__})")
            answers.extend(results)
        if silent:
            raise StateUnavailable(silent[0])
        for answer in answers:
            if "unavailable" in answer:
                raise StateUnavailable(answer["unavailable"])
        return answers

    def close(self) -> None:
        for group in self.groups:
            if self.in_process:
                group.close()
                continue
            if group.closed:
                continue
            if not self._stopping:
                # ask every worker to close its env, then wait for them all within one env_timeout
                for i in range(len(group.parent_pipes)):
                    if group.processes[i].exitcode is None and group.parent_pipes[i] is not None:
                        self._command(self.groups.index(group), i, ("close", None))
                deadline = time.monotonic() + self.supervision.timeout
                for process in group.processes:
                    process.join(timeout=max(deadline - time.monotonic(), 0.0))
            self._kill(group)  # whatever is left: a lost, hung or stopped worker is not waited on
        for spliced in self._spliced:
            for vector in spliced.values():
                self._kill(vector)  # its process was joined with the group's: only the bookkeeping is left

"""Experience collection's environment side: N copies of an environment, seen as agent-id dicts.

``VectorEnv`` is the small interface the strategies call (reset, step, close). Implementations:
  * ``GymVector``: a Gymnasium vector env (the API's same-step autoreset), either the in-process
    ``InProcessVectorEnv`` below or Gymnasium's ``AsyncVectorEnv`` with shared memory (one process per env).
  * ``ParallelVector``: N PettingZoo parallel envs in this process.
A distributed implementation (e.g. Ray actors) only has to provide the same three methods.

Environments report per-episode metrics (capture rate, furthest x...) by putting a dict of floats
under ``info["episode_metrics"]`` on the step that ends the episode.
"""

from __future__ import annotations

import base64
import hashlib
import multiprocessing
import os
import pickle
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from .env_state import StateUnavailable, get_env_state, set_env_states
from .errors import EnvWorkerError, PluginError
from .interfaces import EPISODE_METRICS, SINGLE_AGENT, AgentArrays, AgentBatch, EnvSpec, StateTree


@dataclass(frozen=True)
class EnvProbe:
    """What one built copy of an environment tells about every copy: enough to describe it
    (``describe_env``) and to set up Gymnasium's vector envs, without building another one."""

    multi_agent: bool
    spec: EnvSpec
    """Described with ``num_envs=1``; ``EnvFactory.describe`` fills in the real count."""
    metadata: dict[str, Any]
    render_mode: str | None


@dataclass
class EnvFactory:
    """A picklable recipe for one environment: the registered builder and its validated config."""

    build_env: Callable[..., Any]
    config: Any
    render_mode: str | None = None
    _probe: EnvProbe | None = field(default=None, init=False, repr=False, compare=False)
    """The first probe's result. Building an env can take a second (Mario loads its ROM and plays
    through the title screen): the run's check, the vector env and Gymnasium's groups all ask, and
    they all get this one answer. Never pickled: a worker builds its own env."""

    def __call__(self) -> Any:
        if self.render_mode is None:
            return self.build_env(self.config)
        return self.build_env(self.config, render_mode=self.render_mode)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_probe": None}

    def probe(self, name: str = "") -> EnvProbe:
        """Build one env (the first time only), read what it tells about its kind, close it."""
        if self._probe is None:
            env = self()
            try:
                multi = is_multi_agent(env)
                spec = describe_env(name, env, 1)
                metadata = {} if multi else dict(getattr(env, "metadata", {}) or {})
                self._probe = EnvProbe(multi, spec, metadata, None if multi else getattr(env, "render_mode", None))
            finally:
                env.close()
        return self._probe

    def describe(self, name: str, num_envs: int) -> EnvSpec:
        """``describe_env`` of this factory's env, from the (cached) probe."""
        spec = self.probe(name).spec
        return replace(spec, name=name, num_envs=num_envs, metadata=dict(spec.metadata))


def probe_of(factory: Callable[[], Any], name: str = "") -> EnvProbe:
    """``factory.probe`` where the factory caches one (``EnvFactory``); a fresh probe for any other callable."""
    if isinstance(factory, EnvFactory):
        return factory.probe(name)
    return EnvFactory(lambda _config: factory(), None).probe(name)


def is_multi_agent(env: Any) -> bool:
    return hasattr(env, "possible_agents") and not isinstance(env, gymnasium.Env)


@dataclass
class StepBatch:
    """The result of stepping every env once. Per agent id, arrays of shape (N, ...)."""

    obs: AgentArrays
    """What to act on next (the reset observation where an episode ended)."""
    next_obs: AgentArrays
    """The observation the step led to (the final observation where an episode ended)."""
    rewards: AgentArrays
    terminated: AgentArrays
    truncated: AgentArrays
    alive: AgentArrays
    """The agent took part in this step."""
    episode_ended: np.ndarray
    """(N,) bool. Treat every array of a batch as read-only: collectors may share them between steps."""
    ended_envs: list[int]
    """The indices where ``episode_ended`` is True, as a Python list: a free test for the common
    no-episode-ended step, which per-step loops at one env would otherwise pay numpy calls for."""
    reward_matrix: np.ndarray
    """(agents, N) float32, rows in ``spec.agent_ids`` order; ``rewards[a]`` are views of its rows,
    so per-step bookkeeping over every agent is one numpy operation."""
    episode_metrics: dict[int, dict[str, float]]
    """Env index -> metrics reported by episodes that ended at this step."""
    final_frames: dict[int, Any] | None = None
    """Env index -> the rendered last frame of an episode that ended (only when recording)."""
    dropped: tuple[int, ...] = ()
    """Env indices whose episode was cut short by a restarted env worker: they are in ``ended_envs``
    (so agents reset their state and no return is bootstrapped across), not ``alive`` (so learners
    skip the step), and the episode is left out of the stats."""

    @staticmethod
    def concat(parts: list[StepBatch]) -> StepBatch:
        """The batches of consecutive env ranges as one batch over all of them, in order."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(part.episode_ended) for part in parts[:-1]]).tolist()

        def joined(name: str) -> AgentArrays:
            return {a: np.concatenate([getattr(part, name)[a] for part in parts]) for a in parts[0].rewards}

        def shifted(name: str) -> dict[int, Any]:
            return {offset + i: value for offset, part in zip(offsets, parts, strict=True)
                    for i, value in (getattr(part, name) or {}).items()}

        frames = shifted("final_frames")
        return StepBatch(joined("obs"), joined("next_obs"), joined("rewards"), joined("terminated"),
                         joined("truncated"), joined("alive"),
                         np.concatenate([part.episode_ended for part in parts]),
                         [offset + i for offset, part in zip(offsets, parts, strict=True) for i in part.ended_envs],
                         np.concatenate([part.reward_matrix for part in parts], axis=1),
                         shifted("episode_metrics"), frames or None,
                         tuple(offset + i for offset, part in zip(offsets, parts, strict=True) for i in part.dropped))


class VectorEnv:
    """N env copies behind reset/step/close.

    ``parts`` are ranges of envs that can step on their own (one group of worker processes each):
    ``step_async(i, actions)`` then ``step_wait(i)`` steps part ``i`` alone, so a strategy can compute
    one part's next actions while another part steps. ``step`` steps them all.
    """

    spec: EnvSpec
    num_envs: int
    acting: str = "the agent"
    """Who chooses the actions (set by the strategy to name the algorithm and its plugin in errors)."""
    _actions_checked = False

    @property
    def parts(self) -> list[slice]:
        return [slice(0, self.num_envs)]

    def _check_actions(self, actions: AgentArrays, rows: int) -> None:
        """Check the first actions only: a plugin's agent is consistent or wrong from the start, and
        a check on every step would cost the fast envs a good part of their speed."""
        if not self._actions_checked:
            check_actions(self.spec, actions, rows, self.acting)
            self._actions_checked = True

    def reset(self, seed: int | None = None) -> AgentArrays:
        raise NotImplementedError

    def step(self, actions: AgentArrays) -> StepBatch:
        raise NotImplementedError

    def step_async(self, part: int, actions: AgentArrays) -> None:
        self._pending = actions

    def step_wait(self, part: int) -> StepBatch:
        return self.step(self._pending)

    def close(self) -> None:
        raise NotImplementedError

    def render(self) -> Any:
        """The first env's RGB frame (for recording)."""
        raise NotImplementedError

    def get_state(self) -> StateTree:
        """Every env copy's state, for an exact resume (``rlf.env_state``); raises ``StateUnavailable``
        saying why where the envs cannot say it (then a resume starts fresh episodes)."""
        raise StateUnavailable(f"{type(self).__name__} does not save env state")

    def set_state(self, state: StateTree) -> None:
        """Put freshly built env copies into the state ``get_state`` returned."""
        raise StateUnavailable(f"{type(self).__name__} does not restore env state")


def _space_kind(space: gymnasium.Space) -> str:
    return "discrete" if isinstance(space, gymnasium.spaces.Discrete) else "continuous"


def action_kinds(spec: EnvSpec) -> dict[str, str]:
    return {agent: _space_kind(space) for agent, space in spec.action_spaces.items()}


def _expected(space: gymnasium.Space, rows: int) -> str:
    shape = (rows, *space.shape)
    if isinstance(space, gymnasium.spaces.Discrete):
        return f"integers of shape {shape} in [{space.start}, {space.start + space.n})"
    if isinstance(space, gymnasium.spaces.MultiDiscrete | gymnasium.spaces.MultiBinary):
        return f"integers of shape {shape} within {space}"
    return f"{np.dtype(space.dtype).name} values of shape {shape} within {space}"


def check_actions(spec: EnvSpec, actions: Any, rows: int, acting: str) -> None:
    """Actions as the env's action spaces require them: one array of ``rows`` per agent id, the
    right shape, integers within range for discrete spaces, finite values for continuous ones."""
    if not isinstance(actions, dict) or set(actions) != set(spec.agent_ids):
        got = sorted(actions) if isinstance(actions, dict) else type(actions).__name__
        raise PluginError(f"{acting} returned actions for {got}, but {spec.name} expects a dict with the "
                          f"agent ids {list(spec.agent_ids)}; fix the plugin's Agent.act")
    for agent, space in spec.action_spaces.items():
        value = actions[agent]
        array = np.asarray(value) if not isinstance(value, np.ndarray) else value
        discrete = isinstance(space, gymnasium.spaces.Discrete | gymnasium.spaces.MultiDiscrete
                              | gymnasium.spaces.MultiBinary)
        problem = None
        if array.shape != (rows, *space.shape):
            problem = f"shape {array.shape}"
        elif discrete and array.dtype.kind not in "iu":
            problem = f"dtype {array.dtype}"
        elif array.dtype.kind == "f" and not np.isfinite(array).all():
            problem = "non-finite values"
        elif isinstance(space, gymnasium.spaces.Discrete) and (
                (array < space.start).any() or (array >= space.start + space.n).any()):
            problem = f"values {sorted(set(array.tolist()))}"
        elif isinstance(space, gymnasium.spaces.MultiDiscrete | gymnasium.spaces.MultiBinary):
            # Box bounds are not enforced: continuous agents commonly leave clipping to the env
            if not all(space.contains(row.astype(space.dtype)) for row in array):
                problem = f"values outside the space (first row {array[0].tolist()})"
        if problem:
            raise PluginError(f"{acting} returned {problem} for agent {agent!r} of {spec.name}; expected "
                              f"{_expected(space, rows)}; fix the plugin's Agent.act")


def describe_env(name: str, env: Any, num_envs: int) -> EnvSpec:
    if is_multi_agent(env):
        agents = tuple(env.possible_agents)
        metadata = dict(getattr(env, "rlf_metadata", {}) or {})
        return EnvSpec(name, agents, {a: env.observation_space(a) for a in agents},
                       {a: env.action_space(a) for a in agents}, True, num_envs, metadata)
    metadata = dict(getattr(env.unwrapped, "rlf_metadata", {}) or {})
    return EnvSpec(name, (SINGLE_AGENT,), {SINGLE_AGENT: env.observation_space},
                   {SINGLE_AGENT: env.action_space}, False, num_envs, metadata)


class InProcessVectorEnv(gymnasium.vector.VectorEnv):
    """Gymnasium's vector API with same-step autoreset, lean enough for envs that step in microseconds.

    Gymnasium's SyncVectorEnv merges every sub-env's info dict on every step; for CartPole that
    halves throughput. Here infos are only looked at when an episode ends.
    """

    def __init__(self, env_fns: list[Callable[[], gymnasium.Env]]):
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = gymnasium.vector.utils.batch_space(first.observation_space, self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(first.action_space, self.num_envs)
        self.metadata = {**first.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        self.render_mode = first.render_mode
        shape, dtype = first.observation_space.shape, first.observation_space.dtype
        self._obs = np.zeros((self.num_envs, *shape), dtype=dtype)
        self._rewards = np.zeros(self.num_envs, dtype=np.float64)
        self._terminated = np.zeros(self.num_envs, dtype=bool)
        self._truncated = np.zeros(self.num_envs, dtype=bool)
        self.record_final_frames = False

    def reset(self, *, seed=None, options=None):
        seeds = [None] * self.num_envs if seed is None else [seed + i for i in range(self.num_envs)]
        for i, env in enumerate(self.envs):
            self._obs[i], _ = env.reset(seed=seeds[i], options=options)
        return self._obs.copy(), {}

    def step(self, actions):
        infos: dict[str, Any] = {}
        obs, rewards, terminated, truncated = self._obs, self._rewards, self._terminated, self._truncated
        for i, env in enumerate(self.envs):
            observation, rewards[i], terminated[i], truncated[i], info = env.step(actions[i])
            if terminated[i] or truncated[i]:
                if not infos:
                    infos = {"final_obs": np.full(self.num_envs, None, dtype=object),
                             "_final_obs": np.zeros(self.num_envs, dtype=bool),
                             "final_info": [None] * self.num_envs}
                infos["final_obs"][i] = observation
                infos["_final_obs"][i] = True
                infos["final_info"][i] = info
                if self.record_final_frames:  # the frame of the last step, before the reset replaces it
                    infos.setdefault("final_frame", [None] * self.num_envs)[i] = env.render()
                observation, _ = env.reset()
            obs[i] = observation
        return obs.copy(), rewards.copy(), terminated.copy(), truncated.copy(), infos

    def render(self):
        return self.envs[0].render()

    def close_extras(self, **kwargs):
        for env in self.envs:
            env.close()


def _final_info(infos: dict[str, Any], index: int) -> dict[str, Any]:
    final = infos.get("final_info")
    if final is None:
        return {}
    if isinstance(final, list):  # InProcessVectorEnv
        return final[index] or {}
    # Gymnasium's batched form: a dict of arrays with "_key" masks, nested for dict values
    return _unbatch(final, index)


def _unbatch(batched: dict[str, Any], index: int) -> dict[str, Any]:
    out = {}
    for key, value in batched.items():
        if key.startswith("_"):
            continue
        mask = batched.get(f"_{key}")
        if mask is not None and not mask[index]:
            continue
        out[key] = _unbatch(value, index) if isinstance(value, dict) else value[index]
    return out


def _metrics_of(info: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in (info.get(EPISODE_METRICS) or {}).items()}


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
        preload = ["rlf.envs", *([module] if module else [])]
        payload = _template_payload(factory)
        if payload is not None:
            preload.append("rlf._fork_template")
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
    from ._fork_template import VARIABLE

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
    (``fork_template = True`` on the builder function: see rlf._fork_template)."""
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


class _WorkerEnvFn:
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
        if self.probe is not None:
            return _ProbedEnv(self.probe)
        if self.template is not None:
            from . import _fork_template

            env = _fork_template.take(self.template)
            if env is not None:
                return env
        return self.factory()


WORKER_NICENESS = 19
"""Env worker processes run at the lowest CPU priority. When the cores are oversubscribed (8 Mario
workers on 2 cores), the process that acts for them then gets a core as soon as it has work: every
worker of a group waits on its actions, so its latency gates them all. On an idle core nothing
changes. Measured in benchmarks/ppo_mario.py: collection / random stepping 0.85 -> 0.88 (mean of 4)."""


def _deprioritize(pids: list[int]) -> None:
    try:
        target = os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS
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


_WORKER_LOST = (EOFError, BrokenPipeError, ConnectionResetError, multiprocessing.TimeoutError)
"""What Gymnasium's AsyncVectorEnv raises when a worker process is gone or silent."""


def exit_description(exitcode: int) -> str:
    """How a child process ended, for error lines: 'was killed by signal SIGKILL', 'exited with code 3'."""
    if exitcode < 0:
        try:
            return f"was killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


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
                 supervision: Supervision | None = None):
        self.name = name
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
        env_fn = _WorkerEnvFn(self.factory, probe_of(self.factory, self.name),
                              template_key(self.factory) if context == "forkserver" else None)
        try:
            group = gymnasium.vector.AsyncVectorEnv([env_fn] * size, shared_memory=True,
                                                    autoreset_mode=AutoresetMode.SAME_STEP,
                                                    context=context)
        except _WORKER_LOST as exc:  # Gymnasium waits on each new worker without a timeout
            raise EnvWorkerError(f"env workers of {self.name} died while starting ({type(exc).__name__}); "
                                 "check that the environment can be built in a fresh process") from None
        _deprioritize([process.pid for process in group.processes])
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
        return {SINGLE_AGENT: observations[0] if len(observations) == 1 else np.concatenate(observations)}

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
        for i, action in enumerate(gymnasium.vector.utils.iterate(group.action_space, actions)):
            self._command(part, i, ("step", action))

    def step_wait(self, part: int) -> StepBatch:
        group = self.groups[part]
        if self.in_process:
            return self._batch(part, *group.step(self._pending_actions[part]))
        results, lost = self._receive(part)
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
            except (*_WORKER_LOST, OSError) as exc:
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
        except (*_WORKER_LOST, OSError) as exc:
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
        obs = self.groups[part].observations.copy()
        for i, vector in self._spliced[part].items():
            obs[i] = vector.observations[0]
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
            next_obs = obs.copy()
            for i in ended_envs:
                next_obs[i] = infos["final_obs"][i]
                found = _metrics_of(_final_info(infos, i))
                if found:
                    metrics[i] = found
        frames = infos.get("final_frame")
        reward_matrix = rewards.astype(np.float32)[None]
        return StepBatch({SINGLE_AGENT: obs}, {SINGLE_AGENT: next_obs}, {SINGLE_AGENT: reward_matrix[0]},
                         {SINGLE_AGENT: terminated}, {SINGLE_AGENT: truncated}, self._alive[part], ended,
                         ended_envs, reward_matrix, metrics,
                         {i: f for i, f in enumerate(frames) if f is not None} if frames else None)

    def get_state(self) -> StateTree:
        if not self.in_process:
            raise StateUnavailable("the envs run in worker processes (vector=async)")
        return {"envs": [get_env_state(env) for env in self.groups[0].envs]}

    def set_state(self, state: StateTree) -> None:
        if not self.in_process:
            raise StateUnavailable("the envs run in worker processes (vector=async)")
        set_env_states(self.groups[0].envs, state["envs"])

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


OUTCOME_CACHE = 256
"""Distinct step outcomes (rewards and flags of every agent in every env) ParallelVector keeps arrays for."""


class ParallelVector(VectorEnv):
    """N PettingZoo parallel envs in this process, with same-step autoreset.

    Agents that leave an episode early (e.g. a captured prey) are reported with ``alive`` False and
    a zero observation until the whole episode ends and every env resets. The rewards, flags and
    ``episode_ended`` arrays of its batches are read-only and may be shared between steps.

    Where every agent's observations share shape and dtype, the batch's per-agent dicts are
    ``AgentBatch`` es (one (agents, N, ...) array behind them, see ``rlf.AgentBatch``); where every env
    also has ``step_arrays`` (the optional batched step protocol, docs/PLUGIN_GUIDE.md), envs are
    stepped through it instead of ``step``'s per-agent dicts.
    """

    def __init__(self, name: str, factory: EnvFactory, num_envs: int):
        self.envs = [factory() for _ in range(num_envs)]
        self.num_envs = num_envs
        self.spec = describe_env(name, self.envs[0], num_envs)
        self._zeros = {a: np.zeros(space.shape, dtype=space.dtype)
                       for a, space in self.spec.observation_spaces.items()}
        self._layouts = [(a, zero, (num_envs, *zero.shape)) for a, zero in self._zeros.items()]
        layouts = {(zero.shape, zero.dtype) for zero in self._zeros.values()}
        self._stacked_layout = None
        """(agents, N, *shape) and dtype of the stacked observations, where all agents share them."""
        if len(layouts) == 1:
            (shape, dtype), = layouts
            self._stacked_layout = ((len(self.spec.agent_ids), num_envs, *shape), dtype)
        self._batched = self._stacked_layout is not None and all(
            callable(getattr(env, "step_arrays", None)) for env in self.envs)
        self._arrays_checked = False
        self._outcomes: dict[tuple, tuple] = {}
        self._none_ended = np.zeros(num_envs, dtype=bool)
        self._none_ended.flags.writeable = False
        self._row_of = {a: row for row, a in enumerate(self.spec.agent_ids)}
        self._record = False

    def render(self):
        return self.envs[0].render()

    @property
    def render_fps(self) -> int | None:
        return (getattr(self.envs[0], "metadata", None) or {}).get("render_fps")

    def record_final_frames(self) -> None:
        self._record = True

    def _gather(self, per_env_obs: list[dict[str, np.ndarray]]) -> AgentArrays:
        if self._stacked_layout is not None:
            shape, dtype = self._stacked_layout
            stacked = np.zeros(shape, dtype=dtype)  # absent agents keep the zero observation
            for r, a in enumerate(self.spec.agent_ids):
                for i, obs in enumerate(per_env_obs):
                    found = obs.get(a)
                    if found is not None:
                        stacked[r, i] = found
            return AgentBatch.of(self.spec.agent_ids, stacked)
        gathered = {}
        for a, zero, shape in self._layouts:
            batch = np.empty(shape, dtype=zero.dtype)  # np.stack costs 5x more
            for i, obs in enumerate(per_env_obs):
                batch[i] = obs.get(a, zero)
            gathered[a] = batch
        return gathered

    def reset(self, seed: int | None = None) -> AgentArrays:
        observations = []
        for i, env in enumerate(self.envs):
            obs, _ = env.reset(seed=None if seed is None else seed + i)
            observations.append(obs)
        return self._gather(observations)

    def step(self, actions: AgentArrays) -> StepBatch:
        if self._batched:
            return self._step_arrays(actions)
        # The per-step path of every multi-agent run, and at one env with a few agents the env's own
        # step is cheaper than this wrapping: fields are filled as flat Python lists (agent-major,
        # index row * N + env) and turned into arrays once per distinct outcome (``_outcome``). A numpy
        # call per agent and field, or a nested list, would cost more than the env.
        self._check_actions(actions, self.num_envs)
        n, ids, row_of = self.num_envs, self.spec.agent_ids, self._row_of
        size = len(ids) * n
        chosen = self._action_rows(actions)
        rewards = [0.0] * size
        terminated, truncated, alive = [False] * size, [False] * size, [False] * size
        next_list, obs_list, ended_envs, metrics, frames = [], [], [], {}, {}
        for i, env in enumerate(self.envs):
            present = env.agents
            obs, rew, term, trunc, infos = env.step({a: chosen[row_of[a]][i] for a in present})
            for a in present:
                k = row_of[a] * n + i
                alive[k] = True
                rewards[k] = rew.get(a, 0.0)
                terminated[k] = term.get(a, False)
                truncated[k] = trunc.get(a, False)
            next_list.append(obs)
            if not env.agents:
                ended_envs.append(i)
                found: dict[str, float] = {}
                for info in infos.values():
                    found.update(_metrics_of(info))
                if found:
                    metrics[i] = found
                if self._record:
                    frames[i] = env.render()
                obs, _ = env.reset()
            obs_list.append(obs)
        outcome = self._outcomes.get((*rewards, *terminated, *truncated, *alive))
        if outcome is None:
            outcome = self._outcome(rewards, terminated, truncated, alive)
        reward_matrix, reward_rows, terminated_rows, truncated_rows, alive_rows = outcome
        if ended_envs:
            ended = np.zeros(n, dtype=bool)
            ended[ended_envs] = True
        else:
            ended = self._none_ended
        next_obs = self._gather(next_list)
        # Without an episode end the next observations are the ones to act on: share the arrays, as
        # the Gymnasium path does.
        return StepBatch(self._gather(obs_list) if ended_envs else next_obs, next_obs, reward_rows, terminated_rows,
                         truncated_rows, alive_rows, ended, ended_envs, reward_matrix, metrics, frames or None)

    def _action_rows(self, actions: AgentArrays) -> list[list[Any]]:
        """Every agent's actions as Python values, rows in ``spec.agent_ids`` order: one ``tolist``
        where the agent handed an ``AgentBatch`` in that order."""
        ids = self.spec.agent_ids
        stacked = getattr(actions, "stacked", None)
        if stacked is not None and (actions.ids is ids or tuple(actions.ids) == ids):
            return stacked.tolist()
        return [actions[a].tolist() for a in ids]

    def _step_arrays(self, actions: AgentArrays) -> StepBatch:
        """``step`` through the envs' ``step_arrays``: no per-agent dicts on either side. At one env
        with a few agents the wrapping around the env's step is most of a step's cost, so the one-env
        case takes the env's lists and array as they come."""
        if not self._actions_checked:
            self._check_actions(actions, self.num_envs)
        n, ids = self.num_envs, self.spec.agent_ids
        stacked = getattr(actions, "stacked", None)
        chosen = stacked.tolist() if stacked is not None and actions.ids is ids else self._action_rows(actions)
        ended_envs, metrics, frames = [], {}, {}
        if n == 1:
            env = self.envs[0]
            rows, rewards, terminated, truncated, alive, found = env.step_arrays([row[0] for row in chosen])
            if not self._arrays_checked:
                self._check_arrays(rows, rewards, terminated, truncated, alive)
            next_obs = AgentBatch.of(ids, rows[:, None])
            reset_rows = None
            if not env.agents:
                ended_envs.append(0)
                if found:
                    metrics[0] = {k: float(v) for k, v in found.items()}
                if self._record:
                    frames[0] = env.render()
                reset_rows = env.reset()[0]
        else:
            size = len(ids) * n
            rewards = [0.0] * size
            terminated, truncated, alive = [False] * size, [False] * size, [False] * size
            per_env, reset_rows = [], {}
            for i, env in enumerate(self.envs):
                rows, rew, term, trunc, took_part, found = env.step_arrays([row[i] for row in chosen])
                if not self._arrays_checked:
                    self._check_arrays(rows, rew, term, trunc, took_part)
                rewards[i::n], terminated[i::n], truncated[i::n], alive[i::n] = rew, term, trunc, took_part
                per_env.append(rows)
                if not env.agents:
                    ended_envs.append(i)
                    if found:
                        metrics[i] = {k: float(v) for k, v in found.items()}
                    if self._record:
                        frames[i] = env.render()
                    reset_rows[i] = env.reset()[0]
            next_obs = AgentBatch.of(ids, np.stack(per_env, axis=1))
        self._arrays_checked = True
        outcome = self._outcomes.get((*rewards, *terminated, *truncated, *alive))
        if outcome is None:
            outcome = self._outcome(rewards, terminated, truncated, alive)
        reward_matrix, reward_rows, terminated_rows, truncated_rows, alive_rows = outcome
        if not ended_envs:
            return StepBatch(next_obs, next_obs, reward_rows, terminated_rows, truncated_rows, alive_rows,
                             self._none_ended, ended_envs, reward_matrix, metrics, None)
        ended = np.zeros(n, dtype=bool)
        ended[ended_envs] = True
        stacked = next_obs.stacked.copy()
        for i, reset_obs in ([(0, reset_rows)] if n == 1 else reset_rows.items()):
            for r, a in enumerate(ids):
                found_obs = reset_obs.get(a)
                stacked[r, i] = 0 if found_obs is None else found_obs
        return StepBatch(AgentBatch.of(ids, stacked), next_obs, reward_rows, terminated_rows, truncated_rows,
                         alive_rows, ended, ended_envs, reward_matrix, metrics, frames or None)

    def _check_arrays(self, rows: Any, rewards: Any, terminated: Any, truncated: Any, alive: Any) -> None:
        """The first ``step_arrays`` result has the protocol's types and shapes (an env's bug named
        here, not as wrong numbers deep in a learner)."""
        agents = len(self.spec.agent_ids)
        shape, dtype = self._stacked_layout
        expected = (agents, *shape[2:])
        problem = None
        if not isinstance(rows, np.ndarray) or rows.shape != expected or rows.dtype != dtype:
            got = f"{rows.shape} {rows.dtype}" if isinstance(rows, np.ndarray) else type(rows).__name__
            problem = f"observations {got}, expected an array {expected} {dtype}"
        else:
            for what, values in (("rewards", rewards), ("terminated", terminated), ("truncated", truncated),
                                 ("alive", alive)):
                if not isinstance(values, list) or len(values) != agents:
                    length = len(values) if hasattr(values, "__len__") else "?"
                    problem = f"{what} {type(values).__name__} of length {length}, expected a list of {agents}"
                    break
        if problem:
            raise PluginError(f"{self.spec.name}'s step_arrays returned {problem} (one per agent of "
                              f"{list(self.spec.agent_ids)}); fix the env's step_arrays")

    def _outcome(self, rewards: list[float], terminated: list[bool], truncated: list[bool],
                 alive: list[bool]) -> tuple[np.ndarray, AgentArrays, AgentArrays, AgentArrays, AgentArrays]:
        """The reward matrix and the per-agent rows of one step's rewards and flags, read-only.

        Grid worlds repeat a handful of outcomes (the step cost, nobody done, everyone alive), so the
        arrays of the first OUTCOME_CACHE distinct ones are kept and handed out again: that saves two
        arrays and a view per agent and field on most steps. Read-only, so that sharing them between
        steps cannot let one consumer change what another sees.
        """
        ids, n = self.spec.agent_ids, self.num_envs
        agents = len(ids)
        reward_matrix = np.array(rewards, dtype=np.float32).reshape(agents, n)
        flags = np.array(terminated + truncated + alive, dtype=bool).reshape(3 * agents, n)
        reward_matrix.flags.writeable = False
        flags.flags.writeable = False
        outcome = (reward_matrix, AgentBatch.of(ids, reward_matrix), AgentBatch.of(ids, flags[:agents]),
                   AgentBatch.of(ids, flags[agents:2 * agents]), AgentBatch.of(ids, flags[2 * agents:]))
        if len(self._outcomes) < OUTCOME_CACHE:  # continuous rewards would never repeat: stop adding
            self._outcomes[(*rewards, *terminated, *truncated, *alive)] = outcome
        return outcome

    def get_state(self) -> StateTree:
        return {"envs": [get_env_state(env) for env in self.envs]}

    def set_state(self, state: StateTree) -> None:
        set_env_states(self.envs, state["envs"])

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_vector_env(name: str, factory: EnvFactory, num_envs: int, subprocess: bool,
                    supervision: Supervision | None = None) -> VectorEnv:
    if probe_of(factory, name).multi_agent:
        return ParallelVector(name, factory, num_envs)
    return GymVector(name, factory, num_envs, subprocess, supervision)


def build_sync_collector(env_name: str, factory: EnvFactory, num_envs: int, config: Any = None) -> VectorEnv:
    """The built-in ``sync`` collector: every env copy in this process."""
    return make_vector_env(env_name, factory, num_envs, subprocess=False)


def build_async_collector(env_name: str, factory: EnvFactory, num_envs: int, config: Any = None) -> VectorEnv:
    """The built-in ``async`` collector: one subprocess per env copy (PettingZoo envs stay in-process)."""
    return make_vector_env(env_name, factory, num_envs, subprocess=True)


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
    ``build_actor_pool(job, config) -> rlf.training.off_policy.ActorPool``; None: forked local processes."""
    plugin: str = "rlf"
    """The plugin that registered it, named when its builder fails."""

    def __call__(self, env_name: str, factory: EnvFactory, num_envs: int) -> VectorEnv:
        from .errors import PluginRunError, guarded

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

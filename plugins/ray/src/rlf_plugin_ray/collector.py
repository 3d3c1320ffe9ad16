"""The ``ray`` collector: N environment copies hosted by Ray actors, behind rlf's ``VectorEnv``.

Layout. The envs are split into ``parts`` exactly as ``vector=async`` splits them (so both collect the
same rollouts from the same seed), and each part into actors of at most ``envs_per_actor`` envs. An
actor holds its envs in its own process (``make_vector_env(..., subprocess=False)``) and steps them as
one batch per call; the batch comes back through Ray's object store as one array per agent id.
``step_async(part)`` sends a part's actions to its actors and returns at once, so the on-policy
strategy computes one part's next actions while the other parts step, wherever they run.

Seeding. Env ``i`` of the run is seeded ``seed + i`` on reset, whichever actor holds it, as GymVector
and ParallelVector do; episodes after the first continue each env's own random stream.

Faults. Ray restarts a dead actor (its process, or its whole node) up to ``max_restarts`` times,
somewhere with the resources it asks for. As the core's supervised subprocess envs do, the step it was
doing is reported as ``dropped`` for its envs (an episode end, not ``alive``: nothing is learned from
it and the cut episode stays out of the stats), they start fresh episodes from a seed not used before,
and ``restarts`` counts it (``env_restarts`` in the metrics). Past ``max_restarts`` an
``EnvWorkerError`` stops the run; the last checkpoint is intact.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import ray
from ray.exceptions import ActorUnavailableError, AuthenticationError, GetTimeoutError, RayActorError

from rlf import AgentArrays, ConfigError, EnvFactory, EnvSpec, StepBatch, VectorEnv, make_vector_env

# The one constant not in rlf's public API: how many parts vector=async makes. Following it (rather
# than a copy of its value) is what keeps both collecting the same rollouts.
from rlf.envs import PIPELINE_PARTS
from rlf.errors import EnvWorkerError, RlfError
from rlf.observations import concatenate

from . import probe
from .config import PINNED_RAY, RayCollectorConfig

RESTART_SEED_STRIDE = 1_000_003
"""A restarted actor's envs are seeded ``seed + index + stride * restarts``: fresh episodes, still
reproducible, and (a prime far above any number of envs) never a seed another env had."""
T = TypeVar("T")

LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2
"""The private instance's object store. Step batches are copied out as they arrive, so it only holds
the batches in flight: Ray's default (30% of memory) would reserve gigabytes for nothing."""


class EnvHost:
    """One Ray actor: a group of envs in this process, stepped as one batch per call."""

    def __init__(self, name: str, factory: EnvFactory, num_envs: int, niceness: int):
        if niceness:
            try:
                os.nice(niceness)
            except OSError:  # not allowed here: keep the default priority
                pass
        self.envs = make_vector_env(name, factory, num_envs, subprocess=False)
        self.incarnation = uuid.uuid4().hex  # a restart runs __init__ again: tells restarts apart

    def where(self) -> dict[str, Any]:
        return {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "incarnation": self.incarnation}

    def reset(self, seed: int | None) -> AgentArrays:
        return self.envs.reset(seed=seed)

    def step(self, actions: AgentArrays, incarnation: str) -> StepBatch | None:
        # A call sent after Ray restarted this actor reaches envs that were never reset: None says so.
        return self.envs.step(actions) if incarnation == self.incarnation else None

    def render(self) -> Any:
        return self.envs.render()

    def close(self) -> None:
        self.envs.close()


@dataclass
class _Actor:
    index: int
    part: int
    envs: slice
    """Which of the run's envs this actor holds."""
    handle: Any
    restarts: int = 0
    pending: Any = None
    where: dict[str, Any] = field(default_factory=dict)


def split(total: int, count: int) -> list[int]:
    """``total`` items as ``count`` sizes differing by at most one, larger first (as GymVector splits)."""
    return [total // count + (1 if i < total % count else 0) for i in range(count)]


def auto_envs_per_actor(num_envs: int, parts: int, cpus: float, actor_cpus: float) -> int:
    """``envs_per_actor`` when unset: one actor per CPU the actors can have (at least one per part), each
    stepping its share of the envs. Every Ray call costs CPU on both sides (measured on Mario, 8 envs on 2
    cores: 8 actors of 1 env used 1.22x the CPU per env step of vector=async, 2 actors of 4 1.07x), and an
    actor beyond the free CPUs only waits for a core; with CPUs to spare every env keeps its own process."""
    actors = num_envs if actor_cpus <= 0 else int(cpus // actor_cpus)
    actors = max(parts, min(num_envs, actors))
    return -(-num_envs // actors)


def actor_options(config: RayCollectorConfig) -> dict[str, Any]:
    """Ray actor options from the ``[collector]`` settings: env actors and off-policy actors alike."""
    options: dict[str, Any] = {"num_cpus": config.actor_cpus, "max_restarts": config.max_restarts,
                               "max_task_retries": 0}
    if config.resources:
        options["resources"] = dict(config.resources)
    if config.scheduling == "spread":
        options["scheduling_strategy"] = "SPREAD"
    return options


def resolve_address(config: RayCollectorConfig) -> str:
    return config.address or os.environ.get("RAY_ADDRESS") or "local"


def connect(config: RayCollectorConfig, cpus_needed: float) -> bool:
    """Joins (or starts) the Ray instance the config names; True when this call started it."""
    if ray.is_initialized():  # the user's program (or a test) already chose the cluster
        return False
    address = resolve_address(config)
    quiet = {"logging_level": logging.WARNING, "log_to_driver": True}
    if address == "local":
        _start_local(config, cpus_needed, quiet)
        return True
    problem = probe.check(address, config.connect_timeout_s)
    if problem:
        raise ConfigError(f"collector.address={address}: {problem}")
    try:
        _init_client(address, quiet)
    except (ConnectionError, RuntimeError, ValueError, AuthenticationError) as exc:
        versions = version_mismatch(str(exc))
        if versions:
            raise ConfigError(f"collector.address={address}: {versions}") from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if _client_server_failed(address, exc):
            # The client server's proxy starts one Ray driver per client and gives it
            # RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S (30 s) to come up: a loaded head misses that.
            raise ConfigError(
                f"collector.address={address}: the head's Ray Client server could not start a server for this "
                f"client in {CLIENT_SERVER_TRIES} tries ({first.rstrip(':')}); on a busy head give it longer (RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S"
                "=120 in the head's environment; 30 s by default) and try again, and see the head's "
                "ray_client_server_<port>.err (under /tmp/ray/session_latest/logs) for why") from None
        # Ray 2.60's `ray start` turns token authentication on where a token file exists (any earlier local
        # ray.init writes one), and a driver with an explicit address sends no token unless RAY_AUTH_MODE=token;
        # it is then only told "timeout" or "failed to connect" (docs/SCALE.md).
        token = "" if os.environ.get("RAY_AUTH_MODE", "").lower() == "token" else (
            "; if the cluster uses token authentication (Ray 2.60's `ray start` turns it on where a token file exists), set "
            "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the cluster's token here")
        raise ConfigError(
            f"collector.address={address}: cannot join the Ray cluster ({first}); start one (`ray start "
            f"--head`), set RAY_ADDRESS or collector.address to a running one, or use collector.address=local{token}"
        ) from None
    return False


# Ray Client's proxy starts a fresh driver process for each client that connects; on a head busy with
# other work that start can fail once and succeed on the next connection (seen in CI's tox matrix on 2
# cores, the namespace cluster test). A few tries here, rather than a rerun by the user.
CLIENT_SERVER_TRIES = 3
CLIENT_SERVER_PAUSE_S = 2.0


def _client_server_failed(address: str, exc: BaseException) -> bool:
    return address.startswith("ray://") and "Initialization failure from server" in str(exc)


def _init_client(address: str, quiet: dict[str, Any]) -> None:
    for attempt in range(1, CLIENT_SERVER_TRIES + 1):
        try:
            ray.init(address=address, **quiet)
            return
        except ConnectionError as exc:
            if attempt == CLIENT_SERVER_TRIES or not _client_server_failed(address, exc):
                raise
            logging.getLogger(__name__).warning(
                "collector.address=%s: the head's Ray Client server could not start a server for this client "
                "(try %d of %d); trying again in %.0f s", address, attempt, CLIENT_SERVER_TRIES, CLIENT_SERVER_PAUSE_S)
            time.sleep(CLIENT_SERVER_PAUSE_S)


class RayStartError(RlfError):
    """The private Ray instance of a run could not start: this machine's trouble, not bad input."""

    exit_code = 1


def _start_local(config: RayCollectorConfig, cpus_needed: float, quiet: dict[str, Any]) -> None:
    # A private instance nobody opted into reporting usage for; nothing outside may be reachable.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cpus = config.local_cpus or max(os.cpu_count() or 1, math.ceil(cpus_needed))
    try:
        ray.init(address="local", num_cpus=cpus, include_dashboard=False,
                 object_store_memory=LOCAL_OBJECT_STORE_BYTES, **quiet)
    except Exception as exc:  # noqa: BLE001 - whatever stopped it, the user gets one line and the way on
        try:
            ray.shutdown()  # what did start (a GCS without its raylet) must not outlive the run
        except Exception:  # noqa: BLE001
            pass
        temp = os.environ.get("RAY_TMPDIR") or "/tmp"
        raise RayStartError(
            f"the private Ray instance of this run (collector.address=local) could not start: {type(exc).__name__}: "
            f"{_first_line(exc)}; Ray needs a writable {temp}/ray (RAY_TMPDIR moves it) with short socket paths, "
            f"free memory for its {LOCAL_OBJECT_STORE_BYTES // 1024**2} MB object store in /dev/shm (a container "
            f"needs --shm-size) and its logs under {temp}/ray/session_latest/logs say more; or join a running "
            "cluster with collector.address, or train with vector=async") from None


_VERSIONS = re.compile(r"The cluster was started with:\s*Ray: (\S+)\s*Python: (\S+)\s*"
                       r"This process on .*? was started with:\s*Ray: (\S+)\s*Python: (\S+)", re.S)


def version_mismatch(message: str) -> str | None:
    """Ray's several-line version refusal as one line naming both sides' versions, or None."""
    found = _VERSIONS.search(message)
    if not found:
        return None
    cluster_ray, cluster_python, own_ray, own_python = found.groups()
    text = (f"version mismatch: the cluster runs Ray {cluster_ray} on Python {cluster_python}, this process Ray "
            f"{own_ray} on Python {own_python}; ")
    if cluster_ray != own_ray:
        return text + (f"run the trainer with Ray {cluster_ray} (rlf-plugin-ray pins ray=={PINNED_RAY}, as the rlf "
                       "image has it), or start the cluster from the rlf image")
    same_minor = cluster_python.split(".")[:2] == own_python.split(".")[:2]
    hint = (" (only the patch level differs: RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor on both sides accepts it)"
            if same_minor else "")
    return text + f"run the trainer on Python {cluster_python}, as the cluster's nodes are{hint}"


class RayVector(VectorEnv):
    """``num_envs`` envs on Ray actors, in ``parts`` that step independently (see the module doc)."""

    def __init__(self, name: str, factory: EnvFactory, num_envs: int, config: RayCollectorConfig):
        self.num_envs = num_envs
        self.config = config
        probe = make_vector_env(name, factory, 1, subprocess=False)
        try:
            self.spec: EnvSpec = dataclasses.replace(probe.spec, num_envs=num_envs)
        finally:
            probe.close()
        # As vector=async: two groups of Gymnasium envs, one group of PettingZoo envs (in-process there).
        count = min(config.parts or (1 if self.spec.multi_agent else PIPELINE_PARTS), num_envs)
        sizes = split(num_envs, count)
        starts = np.cumsum([0, *sizes]).tolist()
        self._parts = [slice(a, b) for a, b in zip(starts, starts[1:], strict=False)]
        per_actor, owns = config.envs_per_actor, None
        if per_actor is None:
            if resolve_address(config) == "local" and not ray.is_initialized():  # started below, for the layout
                cpus = float(config.local_cpus or os.cpu_count() or 1)
            else:
                owns = connect(config, 0.0)
                cpus = float(ray.available_resources().get("CPU", 0.0))
            per_actor = auto_envs_per_actor(num_envs, len(self._parts), cpus, config.actor_cpus)
        self.envs_per_actor = per_actor
        layout: list[tuple[int, slice]] = []
        for index, part in enumerate(self._parts):
            size = part.stop - part.start
            chunks = split(size, -(-size // per_actor))
            offsets = np.cumsum([part.start, *chunks]).tolist()
            layout.extend((index, slice(a, b)) for a, b in zip(offsets, offsets[1:], strict=False))
        self._owns_ray = connect(config, config.actor_cpus * len(layout)) if owns is None else owns
        self._address = resolve_address(config)
        remote = ray.remote(EnvHost).options(**actor_options(config))
        self.actors = [_Actor(i, part, envs, remote.remote(name, factory, envs.stop - envs.start, config.niceness))
                       for i, (part, envs) in enumerate(layout)]
        self._by_part = [[actor for actor in self.actors if actor.part == p] for p in range(len(self._parts))]
        self.restarts = 0
        """Actor restarts so far (the Trainer logs them as ``env_restarts``)."""
        self._seed: int | None = None
        self._closed = False
        try:
            self._place()
        except BaseException:
            self.close()
            raise

    # -- placement -------------------------------------------------------------------------------
    def _place(self) -> None:
        refs = [actor.handle.where.remote() for actor in self.actors]
        try:
            places = ray.get(refs, timeout=self.config.restart_timeout_s)
        except GetTimeoutError:
            raise EnvWorkerError(
                f"the Ray cluster ({self._address}) did not start {len(self.actors)} env actors of "
                f"{self.config.actor_cpus:g} CPU{self._resources_text()} within {self.config.restart_timeout_s:g} s "
                f"(free now: {_free_resources()}); lower collector.actor_cpus, raise collector.envs_per_actor "
                "or add nodes") from None
        except RayActorError as exc:
            raise EnvWorkerError(f"an env actor failed to start: {_first_line(exc)}") from exc
        for actor, place in zip(self.actors, places, strict=True):
            actor.where = place

    def _resources_text(self) -> str:
        return "".join(f" + {value:g} {key}" for key, value in self.config.resources.items())

    @property
    def placement(self) -> list[str]:
        """The Ray node id each actor runs on, in actor order (as of its latest start)."""
        return [actor.where.get("node_id", "") for actor in self.actors]

    # -- VectorEnv -------------------------------------------------------------------------------
    @property
    def parts(self) -> list[slice]:
        return self._parts

    def reset(self, seed: int | None = None) -> AgentArrays:
        self._seed = seed
        refs = [actor.handle.reset.remote(None if seed is None else seed + actor.envs.start) for actor in self.actors]
        observations = []
        for actor, ref in zip(self.actors, refs, strict=True):
            try:
                obs = _owned(ray.get(ref))
            except RayActorError as exc:
                obs = self._restart(actor, exc)
            observations.append(obs)
        return _join(observations)

    def step_async(self, part: int, actions: AgentArrays) -> None:
        offset = self._parts[part].start
        for actor in self._by_part[part]:
            rows = slice(actor.envs.start - offset, actor.envs.stop - offset)
            actor.pending = actor.handle.step.remote({a: array[rows] for a, array in actions.items()},
                                                     actor.where["incarnation"])

    def step_wait(self, part: int) -> StepBatch:
        batches = [self._receive(actor) for actor in self._by_part[part]]
        return StepBatch.concat(batches)

    def step(self, actions: AgentArrays) -> StepBatch:
        for index, part in enumerate(self._parts):
            self.step_async(index, {a: array[part] for a, array in actions.items()})
        return StepBatch.concat([self.step_wait(index) for index in range(len(self._parts))])

    def _receive(self, actor: _Actor) -> StepBatch:
        ref, actor.pending = actor.pending, None
        try:
            batch = ray.get(ref)
        except RayActorError as exc:
            batch = self._lost_step(actor, self._restart(actor, exc))
        else:
            batch = self._lost_step(actor, self._restart(actor, None)) if batch is None else _owned(batch)
        return batch

    def render(self) -> Any:
        return ray.get(self.actors[0].handle.render.remote())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close_actors([actor.handle for actor in getattr(self, "actors", [])], self._owns_ray)

    # -- faults ----------------------------------------------------------------------------------
    def _restart(self, actor: _Actor, error: BaseException | None) -> AgentArrays:
        """Waits for Ray to bring ``actor`` back and resets its envs; their observations (see ``revive``)."""
        label = f"env actor {actor.index} (envs {actor.envs.start}-{actor.envs.stop - 1})"

        def reset(timeout: float) -> AgentArrays:
            seed = None if self._seed is None else self._seed + actor.envs.start + RESTART_SEED_STRIDE * actor.restarts
            return _owned(ray.get(actor.handle.reset.remote(seed), timeout=timeout))

        observations, reborn = revive(actor, error, self.config, label, reset)
        self.restarts += reborn
        return observations

    def _lost_step(self, actor: _Actor, obs: AgentArrays) -> StepBatch:
        """The step a dead actor never reported: its envs' episodes end there, dropped (see StepBatch)."""
        n = actor.envs.stop - actor.envs.start
        ids = self.spec.agent_ids
        everyone = list(range(n))
        reward_matrix = np.zeros((len(ids), n), dtype=np.float32)
        no = {a: np.zeros(n, dtype=bool) for a in ids}
        return StepBatch(obs, obs, dict(zip(ids, reward_matrix, strict=True)), no,
                         {a: flags.copy() for a, flags in no.items()}, {a: flags.copy() for a, flags in no.items()},
                         np.ones(n, dtype=bool), everyone, reward_matrix, {}, None, tuple(everyone))


def _join(observations: list[AgentArrays]) -> AgentArrays:
    if len(observations) == 1:
        return observations[0]
    return {a: concatenate([obs[a] for obs in observations]) for a in observations[0]}


def _owned(value: Any) -> Any:
    """``value`` with every array writable and owned by this process.

    Arrays that Ray deserializes from its object store are read-only views of shared memory: torch
    warns on them, and keeping them would pin each step's object in the store for a whole rollout.
    Arrays that appear twice (obs and next_obs share theirs when no episode ended) stay shared.
    """
    memo: dict[int, np.ndarray] = {}

    def own(array: np.ndarray) -> np.ndarray:
        if array.flags.writeable:  # the object store's memory is never writable
            return array
        copied = memo.get(id(array))
        if copied is None:
            copied = memo[id(array)] = np.array(array)
        return copied

    def walk(item: Any) -> Any:
        if isinstance(item, np.ndarray):
            return own(item)
        if isinstance(item, dict):
            return {key: walk(v) for key, v in item.items()}
        if isinstance(item, tuple):  # the parts of Tuple observations
            return tuple(walk(v) for v in item)
        return item

    if isinstance(value, StepBatch):
        return StepBatch(walk(value.obs), walk(value.next_obs), walk(value.rewards), walk(value.terminated),
                         walk(value.truncated), walk(value.alive), own(value.episode_ended), value.ended_envs,
                         own(value.reward_matrix), value.episode_metrics, value.final_frames)
    return walk(value)


def revive(actor, error: BaseException | None, config: RayCollectorConfig, label: str,
           resume: Callable[[float], T]) -> tuple[T, int]:
    """Waits for Ray to bring a dead ``actor`` back, then ``resume(seconds left)`` on it: its result,
    and the restarts to count (new incarnations seen: more than one when it died again meanwhile).

    Ray reports a death with restarts left as ``ActorUnavailableError`` and one past them (or a
    restart whose setup failed) as ``ActorDiedError``; ``error`` is None when the actor had already
    been restarted when the call reached it. A restart counts only when the actor answers as a new
    incarnation, so a mere network hiccup is not one; ``actor.restarts`` is updated before ``resume``
    runs, so the resumed actor can seed from it. ``actor`` is either pool's: it has ``handle``,
    ``where``, ``index`` and ``restarts``."""
    timeout = config.restart_timeout_s
    deadline = time.monotonic() + timeout
    reborn = 0
    while True:
        if error is not None and not isinstance(error, ActorUnavailableError):
            raise EnvWorkerError(
                f"{label} died for good after {actor.restarts} restart{'' if actor.restarts == 1 else 's'} "
                f"(collector.max_restarts={config.max_restarts}): {_first_line(error)}")
        try:
            place = ray.get(actor.handle.where.remote(), timeout=max(deadline - time.monotonic(), 0.001))
            if place["incarnation"] != actor.where.get("incarnation"):
                actor.restarts += 1
                actor.where = place
                reborn += 1
            return resume(max(deadline - time.monotonic(), 0.001)), reborn
        except GetTimeoutError:
            cause = _first_line(error) if error is not None else "restarted"
            raise EnvWorkerError(
                f"{label} was lost ({cause}) and did not come back within {timeout:g} s (free now: "
                f"{_free_resources()}); raise collector.restart_timeout_s or add nodes") from None
        except RayActorError as exc:  # died again before it answered
            error = exc


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _free_resources() -> str:
    try:
        free = ray.available_resources()
    except Exception:  # noqa: BLE001 - only for the message
        return "unknown"
    shown = {k: v for k, v in free.items() if not k.startswith(("node:", "memory", "object_store_memory"))}
    return ", ".join(f"{v:g} {k}" for k, v in sorted(shown.items())) or "nothing"


def build_collector(env_name: str, factory: EnvFactory, num_envs: int, config: RayCollectorConfig) -> RayVector:
    """The ``ray`` collector's builder (registered by rlf_plugin_ray.plugin)."""
    return RayVector(env_name, factory, num_envs, config)


def close_actors(handles: list, owns_ray: bool) -> None:
    """Lets each actor close its envs (an actor that is gone answers with an error), kills them for
    good, and shuts Ray down if this process started it; never fails on a half-dead cluster."""
    if handles and ray.is_initialized():
        try:
            ray.wait([h.close.remote() for h in handles], num_returns=len(handles), timeout=5.0)
        except Exception:  # noqa: BLE001 - closing must not fail on a half-dead cluster
            pass
        for handle in handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
    if owns_ray and ray.is_initialized():
        ray.shutdown()

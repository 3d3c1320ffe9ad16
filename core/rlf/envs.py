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

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from .interfaces import EPISODE_METRICS, SINGLE_AGENT, AgentArrays, EnvSpec


@dataclass
class EnvFactory:
    """A picklable recipe for one environment: the registered builder and its validated config."""

    build_env: Callable[..., Any]
    config: Any
    render_mode: str | None = None

    def __call__(self) -> Any:
        if self.render_mode is None:
            return self.build_env(self.config)
        return self.build_env(self.config, render_mode=self.render_mode)


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
                         shifted("episode_metrics"), frames or None)


class VectorEnv:
    """N env copies behind reset/step/close.

    ``parts`` are ranges of envs that can step on their own (one group of worker processes each):
    ``step_async(i, actions)`` then ``step_wait(i)`` steps part ``i`` alone, so a strategy can compute
    one part's next actions while another part steps. ``step`` steps them all.
    """

    spec: EnvSpec
    num_envs: int

    @property
    def parts(self) -> list[slice]:
        return [slice(0, self.num_envs)]

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


def _space_kind(space: gymnasium.Space) -> str:
    return "discrete" if isinstance(space, gymnasium.spaces.Discrete) else "continuous"


def action_kinds(spec: EnvSpec) -> dict[str, str]:
    return {agent: _space_kind(space) for agent, space in spec.action_spaces.items()}


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


class GymVector(VectorEnv):
    """A single-agent Gymnasium env, vectorized, as the one agent id ``"agent"``.

    In-process: one ``InProcessVectorEnv``. In subprocesses: ``PIPELINE_PARTS`` Gymnasium
    ``AsyncVectorEnv`` groups (shared memory, spawn), seeded as one vector (env ``i`` gets ``seed + i``).
    """

    def __init__(self, name: str, factory: EnvFactory, num_envs: int, subprocess: bool):
        self.num_envs = num_envs
        if subprocess:
            count = min(PIPELINE_PARTS, num_envs)
            sizes = [num_envs // count + (1 if i < num_envs % count else 0) for i in range(count)]
            self.groups = [gymnasium.vector.AsyncVectorEnv([factory] * size, shared_memory=True,
                                                           autoreset_mode=AutoresetMode.SAME_STEP, context="spawn")
                           for size in sizes]
            _deprioritize([process.pid for group in self.groups for process in group.processes])
        else:
            sizes = [num_envs]
            self.groups = [InProcessVectorEnv([factory] * num_envs)]
        starts = np.cumsum([0, *sizes]).tolist()
        self._parts = [slice(start, stop) for start, stop in zip(starts, starts[1:], strict=False)]
        self._alive = [{SINGLE_AGENT: np.ones(size, dtype=bool)} for size in sizes]
        self._pending_actions: list[np.ndarray | None] = [None] * len(self.groups)
        first = self.groups[0]
        if isinstance(first, InProcessVectorEnv):
            self.spec = describe_env(name, first.envs[0], num_envs)
        else:
            probe = factory()
            self.spec = describe_env(name, probe, num_envs)
            probe.close()

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
        observations = [group.reset(seed=None if seed is None else seed + part.start)[0]
                        for group, part in zip(self.groups, self._parts, strict=True)]
        return {SINGLE_AGENT: observations[0] if len(observations) == 1 else np.concatenate(observations)}

    def step(self, actions: AgentArrays) -> StepBatch:
        if self.in_process:
            return self._batch(0, *self.groups[0].step(actions[SINGLE_AGENT]))
        chosen = actions[SINGLE_AGENT]
        for index, part in enumerate(self._parts):
            self.groups[index].step_async(chosen[part])
        return StepBatch.concat([self._batch(index, *group.step_wait()) for index, group in enumerate(self.groups)])

    def step_async(self, part: int, actions: AgentArrays) -> None:
        if self.in_process:
            self._pending_actions[part] = actions[SINGLE_AGENT]
        else:
            self.groups[part].step_async(actions[SINGLE_AGENT])

    def step_wait(self, part: int) -> StepBatch:
        group = self.groups[part]
        if self.in_process:
            return self._batch(part, *group.step(self._pending_actions[part]))
        return self._batch(part, *group.step_wait())

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

    def close(self) -> None:
        for group in self.groups:
            group.close()


class ParallelVector(VectorEnv):
    """N PettingZoo parallel envs in this process, with same-step autoreset.

    Agents that leave an episode early (e.g. a captured prey) are reported with ``alive`` False and
    a zero observation until the whole episode ends and every env resets.
    """

    def __init__(self, name: str, factory: EnvFactory, num_envs: int):
        self.envs = [factory() for _ in range(num_envs)]
        self.num_envs = num_envs
        self.spec = describe_env(name, self.envs[0], num_envs)
        self._zeros = {a: np.zeros(space.shape, dtype=space.dtype)
                       for a, space in self.spec.observation_spaces.items()}
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
        gathered = {}
        for a, zero in self._zeros.items():
            batch = np.empty((len(per_env_obs), *zero.shape), dtype=zero.dtype)  # np.stack costs 5x more
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
        # Filled as Python lists and turned into arrays once: with one env and a few agents, a numpy
        # call per agent and field would cost more than the env's own step.
        ids, row_of = self.spec.agent_ids, self._row_of
        chosen = [actions[a].tolist() for a in ids]
        rewards = [[0.0] * self.num_envs for _ in ids]
        flags = [[[False] * self.num_envs for _ in ids] for _ in range(3)]  # terminated, truncated, alive
        terminated, truncated, alive = flags
        next_list, obs_list, ended_envs, metrics, frames = [], [], [], {}, {}
        for i, env in enumerate(self.envs):
            present = env.agents
            obs, rew, term, trunc, infos = env.step({a: chosen[row_of[a]][i] for a in present})
            for a in present:
                row = row_of[a]
                alive[row][i] = True
                rewards[row][i] = rew.get(a, 0.0)
                terminated[row][i] = term.get(a, False)
                truncated[row][i] = trunc.get(a, False)
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
        reward_matrix = np.array(rewards, dtype=np.float32)
        flag_arrays = np.array(flags, dtype=bool)
        ended = np.zeros(self.num_envs, dtype=bool)
        ended[ended_envs] = True
        next_obs = self._gather(next_list)
        # Without an episode end the next observations are the ones to act on: share the arrays, as
        # the Gymnasium path does.
        return StepBatch(self._gather(obs_list) if ended_envs else next_obs, next_obs,
                         self._rows(reward_matrix), self._rows(flag_arrays[0]), self._rows(flag_arrays[1]),
                         self._rows(flag_arrays[2]), ended, ended_envs, reward_matrix, metrics, frames or None)

    def _rows(self, matrix: np.ndarray) -> AgentArrays:
        return dict(zip(self.spec.agent_ids, matrix, strict=True))

    def close(self) -> None:
        for env in self.envs:
            env.close()


def make_vector_env(name: str, factory: EnvFactory, num_envs: int, subprocess: bool) -> VectorEnv:
    probe = factory()
    multi = is_multi_agent(probe)
    probe.close()
    if multi:
        return ParallelVector(name, factory, num_envs)
    return GymVector(name, factory, num_envs, subprocess)


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

    def __call__(self, env_name: str, factory: EnvFactory, num_envs: int) -> VectorEnv:
        from .errors import PluginError

        envs = self.build_collector(env_name, factory, num_envs, self.config)
        missing = [attribute for attribute in _CONTRACT if not hasattr(envs, attribute)]
        if missing:
            close = getattr(envs, "close", None)
            if callable(close):
                close()
            raise PluginError(f"collector {self.name!r} returned {type(envs).__name__}, which lacks "
                              f"{', '.join(missing)} of rlf.VectorEnv; fix the collector's plugin")
        if envs.num_envs != num_envs:
            envs.close()
            raise PluginError(f"collector {self.name!r} built {envs.num_envs} envs where {num_envs} were "
                              "asked for; fix the collector's plugin")
        return envs


SYNC = Collector("sync", build_sync_collector)
"""In-process envs: what evaluation and worker processes step, whatever the run's collector."""

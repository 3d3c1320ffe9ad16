"""What the strategies step: N copies of an environment seen as agent-id dicts.

``VectorEnv`` is the small interface the strategies call (reset, step, close); ``StepBatch`` is one step of
every copy; ``EnvFactory`` is the picklable recipe a worker process builds its copy from. Implementations:
``GymVector`` (``gym_vector.py``: a Gymnasium env, in this process or in worker processes) and
``ParallelVector`` (``pettingzoo.py``). A distributed implementation (e.g. Ray actors) only has to provide
the same methods.

Environments report per-episode metrics (capture rate, furthest x...) by putting a dict of floats
under ``info["episode_metrics"]`` on the step that ends the episode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium
import numpy as np

from rlf import observations
from rlf.envs.state import StateUnavailable
from rlf.errors import PluginError
from rlf.interfaces import EPISODE_METRICS, SINGLE_AGENT, AgentArrays, EnvSpec, Resume, StateTree


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
            return {a: observations.concatenate([getattr(part, name)[a] for part in parts]) for a in parts[0].rewards}

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
        """Every env copy's state, for an exact resume (``rlf.envs.state``); raises ``StateUnavailable``
        saying why where the envs cannot say it (then a resume starts fresh episodes)."""
        raise StateUnavailable(f"{type(self).__name__} does not save env state")

    def set_state(self, state: StateTree) -> None:
        """Put freshly built env copies into the state ``get_state`` returned."""
        raise StateUnavailable(f"{type(self).__name__} does not restore env state")

    def on_resume(self, resume: Resume) -> None:
        """Training continues from a checkpoint (``rlf.Resume``), after ``reset`` or ``set_state``;
        optional (the strategy calls it where a collector defines it)."""


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


def final_info_of(infos: dict[str, Any], index: int) -> dict[str, Any]:
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


def episode_metrics_of(info: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in (info.get(EPISODE_METRICS) or {}).items()}

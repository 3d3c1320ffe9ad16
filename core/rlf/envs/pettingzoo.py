"""N PettingZoo parallel envs in this process, one vector per agent id."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlf.envs.base import EnvFactory, StepBatch, VectorEnv, describe_env, episode_metrics_of
from rlf.envs.state import get_env_state, set_env_states
from rlf.errors import PluginError
from rlf.interfaces import AgentArrays, AgentBatch, StateTree

OUTCOME_CACHE = 256
"""Distinct step outcomes (rewards and flags of every agent in every env) ParallelVector keeps arrays for."""


class ParallelVector(VectorEnv):
    """N PettingZoo parallel envs in this process, with same-step autoreset.

    Agents that leave an episode early (e.g. a captured prey) are reported with ``alive`` False and
    a zero observation until the whole episode ends and every env resets. The rewards, flags and
    ``episode_ended`` arrays of its batches are read-only and may be shared between steps.

    Where every agent's observations share shape and dtype, the batch's per-agent dicts are
    ``AgentBatch`` es (one (agents, N, ...) array behind them, see ``rlf.AgentBatch``); where every env
    also has ``step_arrays`` (the optional batched step protocol, docs/plugin-guide/step-arrays.md), envs are
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
                    found.update(episode_metrics_of(info))
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

"""On-policy: roll the vector env out for ``rollout_steps``, compute GAE, learn once, discard.

``collect_rollout`` is public (``rlf.collect_rollout``) so other strategies reuse it: A3C's
asynchronous workers (rlf-plugin-a3c's ``async-workers`` strategy) run it in each worker process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import numpy as np

from rlf import observations
from rlf.envs.base import StepBatch, VectorEnv
from rlf.errors import CheckpointError, PluginError
from rlf.finite import act_on
from rlf.interfaces import Acting, Agent, AgentArrays, Rollout, StateTree
from rlf.plugins.specs import StrategyFamily
from rlf.training.episodes import EpisodeTracker
from rlf.training.startup import learn_call
from rlf.training.strategy import BaseStrategy, StepResult


def compute_gae(rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray, terminated: np.ndarray,
                dones: np.ndarray, gamma: float, gae_lambda: float) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns for arrays shaped (T, N).

    ``next_values[t]`` is V of the observation step t led to (the final one at an episode end).
    Only a true terminal drops the bootstrap; any episode end (terminated or truncated) cuts the
    chain so no advantage leaks from one episode into the next.
    """
    advantages = np.zeros_like(rewards, dtype=np.float32)
    running = np.zeros(rewards.shape[1:], dtype=np.float32)
    not_terminal = 1.0 - terminated.astype(np.float32)
    continues = 1.0 - dones.astype(np.float32)
    for t in range(rewards.shape[0] - 1, -1, -1):
        delta = rewards[t] + gamma * next_values[t] * not_terminal[t] - values[t]
        running = delta + gamma * gae_lambda * continues[t] * running
        advantages[t] = running
    return advantages, advantages + values


def _steps(envs: VectorEnv, agent: Agent, obs: AgentArrays, steps: int,
           stop: Callable[[], bool] | None = None) -> Iterator[tuple[AgentArrays, Acting, StepBatch]]:
    """(observations, acting, step result) for each vector step; ends early, between two vector steps
    (no action chosen or env stepped past the last one yielded), once ``stop()`` is true.

    With envs in several parts (subprocess groups) and an agent whose rows are independent, each
    part's next actions are computed as soon as that part has stepped, while the other parts are
    still stepping: the emulator workers keep the cores busy instead of waiting for inference.
    """
    stopping = stop or (lambda: False)
    parts = envs.parts
    if len(parts) == 1 or not agent.rows_independent:
        for _ in range(steps):
            if stopping():
                return
            acting = act_on(agent, obs, explore=True)
            batch = envs.step(acting.actions)
            yield obs, acting, batch
            obs = batch.obs
        return
    if steps <= 0 or stopping():
        return
    current = []
    for index, rows in enumerate(parts):
        current.append(act_on(agent, {a: observations.index(array, rows) for a, array in obs.items()}, explore=True))
        envs.step_async(index, current[-1].actions)
    for t in range(steps):
        # decided once for every part: all of them take the next step, or none does
        more = t + 1 < steps and not stopping()
        results, upcoming = [], []
        for index in range(len(parts)):
            result = envs.step_wait(index)
            results.append(result)
            if more:
                upcoming.append(act_on(agent, result.obs, explore=True))
                envs.step_async(index, upcoming[-1].actions)
        batch = StepBatch.concat(results)
        yield obs, _concat_acting(current), batch
        if not more:
            return
        obs, current = batch.obs, upcoming


def _concat_acting(parts: list[Acting]) -> Acting:
    first = parts[0]
    return Acting({a: np.concatenate([part.actions[a] for part in parts]) for a in first.actions},
                  {a: {key: np.concatenate([part.extras[a][key] for part in parts]) for key in extras}
                   for a, extras in first.extras.items()})


def acting_owner(algorithm) -> str:
    """How contract errors name an algorithm's agent."""
    return f"plugin {getattr(algorithm, 'plugin', '?')!r} (algorithm {getattr(algorithm, 'name', '?')!r})"


def check_value_extras(acting: Acting, obs: AgentArrays, owner: str) -> None:
    """A wrong or missing ``extras["value"]`` otherwise fails deep in GAE, naming neither plugin nor field."""
    for a, batch in obs.items():
        extras = acting.extras.get(a) or {}
        if "value" not in extras:
            raise PluginError(f'{owner}: act() returned no extras["value"] for agent {a!r}; an on-policy agent '
                              "returns the value estimate of each observation (shape (N,)) beside its actions "
                              "(docs/plugin-guide/contracts.md)")
        n = observations.rows(batch)
        shape = tuple(np.shape(extras["value"]))
        if shape != (n,):
            whose = f" of agent {a!r}" if len(obs) > 1 else ""
            raise PluginError(f'{owner}: act() returned extras["value"] of shape {shape} for {n} observations'
                              f"{whose}; expected ({n},)")


_FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated", "dones", "alive")


class RolloutInProgress:
    """One rollout as it is collected: per field and agent one array per vector step so far, the bootstrap
    values of truncated steps and the rows of the episodes that ended in it. A rollout a stop signal
    interrupted is kept whole in the checkpoint (``state_dict``) and finished after the resume exactly as
    it would have been (the envs, observations and episode accumulators are the checkpoint's ``inflight``)."""

    def __init__(self, agent_ids: tuple[str, ...], steps: int):
        self.agent_ids = tuple(agent_ids)
        self.steps = steps
        """Vector steps the rollout is to have."""
        self.buffers: dict[str, dict[str, list[np.ndarray]]] = {name: {a: [] for a in agent_ids} for name in _FIELDS}
        self.extras: dict[str, dict[str, list[np.ndarray]]] = {a: {} for a in agent_ids}
        self.fixes: list[tuple[int, dict[str, np.ndarray], dict[str, np.ndarray]]] = []
        """(step, truncated envs, V of their final observations) per step where an episode was truncated."""
        self.episodes: list[dict[str, float]] = []

    @property
    def taken(self) -> int:
        return len(self.buffers["rewards"][self.agent_ids[0]])

    @property
    def complete(self) -> bool:
        return self.taken >= self.steps

    def collect(self, envs, agent: Agent, obs: AgentArrays, tracker: EpisodeTracker,
                stop: Callable[[], bool] | None = None, owner: str | None = None) -> AgentArrays:
        """Step until the rollout is complete, or until ``stop()`` between two vector steps; returns the
        observations to act on next. ``owner`` names the agent in contract errors (``acting_owner``)."""
        ids, buffers = self.agent_ids, self.buffers
        first = self.taken
        for t, (acted_on, acting, batch) in enumerate(_steps(envs, agent, obs, self.steps - self.taken, stop),
                                                      self.taken):
            if t == first:  # once per call: an agent's extras keep their shape from step to step
                check_value_extras(acting, acted_on, owner or f"agent class {type(agent).__name__!r}")
            for a in ids:
                buffers["obs"][a].append(acted_on[a])
                buffers["next_obs"][a].append(batch.next_obs[a])
                buffers["actions"][a].append(acting.actions[a])
                buffers["rewards"][a].append(batch.rewards[a])
                buffers["terminated"][a].append(batch.terminated[a])
                buffers["dones"][a].append(batch.terminated[a] | batch.truncated[a] | batch.episode_ended)
                buffers["alive"][a].append(batch.alive[a])
                for key, value in acting.extras.get(a, {}).items():
                    self.extras[a].setdefault(key, []).append(value)
            truncated = {a: batch.truncated[a] & ~batch.terminated[a] for a in ids}
            if any(mask.any() for mask in truncated.values()):
                self.fixes.append((t, truncated, agent.value(batch.next_obs)))
            self.episodes.extend(tracker.update(batch))
            if batch.ended_envs:
                agent.reset_state(batch.episode_ended)
            agent.on_progress(envs.num_envs, len(batch.ended_envs))
            obs = batch.obs
        return obs

    def finish(self, agent: Agent, obs: AgentArrays, gamma: float, gae_lambda: float) -> Rollout:
        """The complete rollout with values, bootstrap values, advantages and returns."""
        ids = self.agent_ids
        last_values = agent.value(obs)
        stack = {name: {a: observations.stack(self.buffers[name][a]) for a in ids} for name in _FIELDS}
        extras = {a: {k: np.stack(v) for k, v in self.extras[a].items()} for a in ids}
        values, next_values, advantages, returns = {}, {}, {}, {}
        for a in ids:
            if "value" not in extras[a]:
                raise TypeError(f"{type(agent).__name__}.act must return extras[{a!r}]['value'] for on-policy training")
            v = extras[a]["value"].astype(np.float32)
            nv = np.concatenate([v[1:], np.asarray(last_values[a], dtype=np.float32)[None]], axis=0)
            for t, truncated, fixed in self.fixes:
                nv[t] = np.where(truncated[a], fixed[a], nv[t])
            values[a], next_values[a] = v, nv
            advantages[a], returns[a] = compute_gae(stack["rewards"][a], v, nv, stack["terminated"][a],
                                                    stack["dones"][a], gamma, gae_lambda)
        return Rollout(stack["obs"], stack["next_obs"], stack["actions"], stack["rewards"], stack["terminated"],
                       stack["dones"], stack["alive"], extras, values, next_values, advantages, returns)

    def state_dict(self) -> StateTree:
        ids = self.agent_ids
        return {"steps": self.steps, "agents": list(ids),
                "buffers": {name: {a: observations.stack(self.buffers[name][a]) for a in ids} for name in _FIELDS},
                "extras": {a: {k: np.stack(v) for k, v in self.extras[a].items()} for a in ids},
                "fixes": [{"step": t, "truncated": dict(truncated), "values": dict(values)}
                          for t, truncated, values in self.fixes],
                "episodes": [dict(row) for row in self.episodes]}

    @classmethod
    def from_state(cls, state: StateTree, agent_ids: tuple[str, ...]) -> RolloutInProgress:
        """Raises ValueError (or KeyError, TypeError) where the saved rollout does not fit these agents."""
        if list(state["agents"]) != list(agent_ids):
            raise ValueError(f"the saved rollout is for agents {list(state['agents'])}, the env has {list(agent_ids)}")
        self = cls(agent_ids, int(state["steps"]))
        taken = None
        for name in _FIELDS:
            for a in agent_ids:
                saved = state["buffers"][name][a]
                array = saved if isinstance(saved, dict | tuple) else np.asarray(saved)
                steps = observations.rows(array)
                if taken is None:
                    taken = steps
                if steps != taken:
                    raise ValueError(f"the saved rollout's {name!r} has {steps} steps, not {taken}")
                self.buffers[name][a] = observations.unstack(array)
        for a in agent_ids:
            self.extras[a] = {key: list(np.asarray(array)) for key, array in state["extras"][a].items()}
        self.fixes = [(int(fix["step"]), {a: np.asarray(v) for a, v in fix["truncated"].items()},
                       {a: np.asarray(v) for a, v in fix["values"].items()}) for fix in state["fixes"]]
        self.episodes = [{key: float(value) for key, value in row.items()} for row in state["episodes"]]
        if not 0 < (taken or 0) < self.steps:
            raise ValueError(f"the saved rollout has {taken} of its {self.steps} steps")
        return self


def collect_rollout(envs, agent: Agent, obs: AgentArrays, steps: int, tracker: EpisodeTracker,
                    gamma: float, gae_lambda: float, algorithm=None,
                    ) -> tuple[Rollout, AgentArrays, list[dict[str, float]]]:
    """``algorithm`` (optional) names the plugin in the error an agent that breaks the contract gets."""
    collection = RolloutInProgress(envs.spec.agent_ids, steps)
    obs = collection.collect(envs, agent, obs, tracker, owner=None if algorithm is None else acting_owner(algorithm))
    return collection.finish(agent, obs, gamma, gae_lambda), obs, collection.episodes


class OnPolicyStrategy(BaseStrategy):
    """Collect a rollout, learn from it, repeat (with ``algo.overlap_update`` the family builds the variant
    in ``rlf.training.overlap`` instead, which learns from one rollout while it collects the next).

    Stop signals: a rollout stops at the next vector step once a stop signal is held, and the checkpoint
    keeps the rollout under way (``partial``) where the envs' state is saved with it, so the resumed run
    finishes it exactly; where it is not, the stop rolls back to the rollout's start (its env steps and
    episodes are not counted).
    """

    family = StrategyFamily.ON_POLICY

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._partial: RolloutInProgress | None = None
        """The rollout a stop signal interrupted, finished by the next ``step``."""
        self._ahead: Rollout | None = None
        """A rollout collected and not yet learned from: only a checkpoint of an overlapped run has one."""
        self._saved_work: tuple[StateTree | None, StateTree | None] = (None, None)
        """A checkpoint's ``partial`` and ``ahead``, applied once ``setup`` has restored the envs."""

    def _collect(self, agent: Agent, limit: int,
                 stop: Callable[[], bool] | None = None) -> tuple[Rollout | None, list[dict[str, float]]]:
        """A rollout and the episodes that ended in it; (None, []) where ``stop`` ended it early (kept in
        ``self._partial``)."""
        config = self.context.config
        collection, self._partial = self._partial, None
        if collection is None:
            steps = max(1, min(config.rollout_steps, -(-limit // self.envs.num_envs)))
            collection = RolloutInProgress(self.envs.spec.agent_ids, steps)
        self.obs = collection.collect(self.envs, agent, self.obs, self.tracker, stop, acting_owner(self.algorithm))
        if not collection.complete:
            self._partial = collection if collection.taken else None
            return None, []
        return collection.finish(agent, self.obs, config.gamma, config.gae_lambda), collection.episodes

    def _learn(self, rollout: Rollout) -> dict[str, float]:
        return learn_call(self.algorithm, self.learner.learn, rollout)

    def step(self, limit: int) -> StepResult:
        if self._ahead is not None:  # saved with overlap_update on, resumed with it off: learned first
            ahead, self._ahead = self._ahead, None
            self._learn(ahead)
        # slow envs make a rollout long (Mario: 512 x 8 steps, ~40 s): a stop does not wait for its end
        rollout, episodes = self._collect(self.agent, limit, self.stop_requested)
        if rollout is None:
            return StepResult(0, partial=True)
        metrics = self._learn(rollout)
        metrics.update(self.agent.metrics())
        return StepResult(rollout.num_steps, metrics, episodes)

    def state_dict(self) -> StateTree:
        state = super().state_dict()
        if self._ahead is not None:
            state["ahead"] = dataclasses.asdict(self._ahead)
        if self._partial is not None:
            if "envs" in state["inflight"]:
                state["partial"] = self._partial.state_dict()
            else:  # the resume starts fresh episodes: the interrupted rollout is not part of the run
                state["episodes"] = {**state["episodes"],
                                     "episodes": self.tracker.episodes - len(self._partial.episodes)}
        return state

    def load_state_dict(self, state: StateTree) -> None:
        self._saved_work = (state.get("partial"), state.get("ahead"))
        super().load_state_dict(state)
        if self.learner is not None:  # restored into a running strategy: its envs were not
            self._apply_saved_work(continued=False)

    def setup(self) -> None:
        super().setup()
        self._apply_saved_work(continued=self._fresh_reason is None)

    def _apply_saved_work(self, continued: bool) -> None:
        """The checkpoint's rollouts: the one waiting for its update, and the one a stop interrupted if
        its episodes continue (else it is dropped, and the episodes that ended in it with it)."""
        (partial, ahead), self._saved_work = self._saved_work, (None, None)
        try:
            if ahead is not None:
                self._ahead = Rollout(**ahead)
            if partial is not None and continued:
                self._partial = RolloutInProgress.from_state(partial, self.envs.spec.agent_ids)
            elif partial is not None:
                self.tracker.episodes -= len(partial["episodes"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"the checkpoint's rollout under way is unusable ({type(exc).__name__}: {exc}); "
                                  "it was not written by this rlf or was edited") from None

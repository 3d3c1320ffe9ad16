"""On-policy: roll the vector env out for ``rollout_steps``, compute GAE, learn once, discard.

``collect_rollout`` is public (``rlf.collect_rollout``) so other strategies reuse it: A3C's
asynchronous workers (rlf-plugin-a3c's ``async-workers`` strategy) run it in each worker process.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from rlf.envs.base import StepBatch, VectorEnv
from rlf.errors import ConfigError
from rlf.interfaces import Acting, Agent, AgentArrays, Learner, Rollout, StateTree
from rlf.plugins.specs import StrategyFamily
from rlf.training.episodes import EpisodeTracker
from rlf.training.startup import plugin_call
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


def _steps(envs: VectorEnv, agent: Agent, obs: AgentArrays,
           steps: int) -> Iterator[tuple[AgentArrays, Acting, StepBatch]]:
    """(observations, acting, step result) for each vector step.

    With envs in several parts (subprocess groups) and an agent whose rows are independent, each
    part's next actions are computed as soon as that part has stepped, while the other parts are
    still stepping: the emulator workers keep the cores busy instead of waiting for inference.
    """
    parts = envs.parts
    if len(parts) == 1 or not agent.rows_independent:
        for _ in range(steps):
            acting = agent.act(obs, explore=True)
            batch = envs.step(acting.actions)
            yield obs, acting, batch
            obs = batch.obs
        return
    current = []
    for index, rows in enumerate(parts):
        current.append(agent.act({a: array[rows] for a, array in obs.items()}, explore=True))
        envs.step_async(index, current[-1].actions)
    for t in range(steps):
        results, upcoming = [], []
        for index in range(len(parts)):
            result = envs.step_wait(index)
            results.append(result)
            if t + 1 < steps:
                upcoming.append(agent.act(result.obs, explore=True))
                envs.step_async(index, upcoming[-1].actions)
        batch = StepBatch.concat(results)
        yield obs, _concat_acting(current), batch
        obs, current = batch.obs, upcoming


def _concat_acting(parts: list[Acting]) -> Acting:
    first = parts[0]
    return Acting({a: np.concatenate([part.actions[a] for part in parts]) for a in first.actions},
                  {a: {key: np.concatenate([part.extras[a][key] for part in parts]) for key in extras}
                   for a, extras in first.extras.items()})


def collect_rollout(envs, agent: Agent, obs: AgentArrays, steps: int, tracker: EpisodeTracker,
                    gamma: float, gae_lambda: float) -> tuple[Rollout, AgentArrays, list[dict[str, float]]]:
    ids = envs.spec.agent_ids
    obs_buf = {a: [] for a in ids}
    next_buf = {a: [] for a in ids}
    act_buf = {a: [] for a in ids}
    rew_buf = {a: [] for a in ids}
    term_buf = {a: [] for a in ids}
    done_buf = {a: [] for a in ids}
    alive_buf = {a: [] for a in ids}
    extra_buf: dict[str, dict[str, list]] = {a: {} for a in ids}
    next_value_fix: list[tuple[int, dict[str, np.ndarray], dict[str, np.ndarray]]] = []
    episodes: list[dict[str, float]] = []
    for t, (acted_on, acting, batch) in enumerate(_steps(envs, agent, obs, steps)):
        for a in ids:
            obs_buf[a].append(acted_on[a])
            next_buf[a].append(batch.next_obs[a])
            act_buf[a].append(acting.actions[a])
            rew_buf[a].append(batch.rewards[a])
            term_buf[a].append(batch.terminated[a])
            done_buf[a].append(batch.terminated[a] | batch.truncated[a] | batch.episode_ended)
            alive_buf[a].append(batch.alive[a])
            for key, value in acting.extras.get(a, {}).items():
                extra_buf[a].setdefault(key, []).append(value)
        truncated = {a: batch.truncated[a] & ~batch.terminated[a] for a in ids}
        if any(mask.any() for mask in truncated.values()):
            next_value_fix.append((t, truncated, agent.value(batch.next_obs)))
        episodes.extend(tracker.update(batch))
        if batch.ended_envs:
            agent.reset_state(batch.episode_ended)
        agent.on_progress(envs.num_envs, len(batch.ended_envs))
        obs = batch.obs

    last_values = agent.value(obs)
    stack = {name: {a: np.stack(buf[a]) for a in ids}
             for name, buf in (("obs", obs_buf), ("next_obs", next_buf), ("actions", act_buf),
                               ("rewards", rew_buf), ("terminated", term_buf), ("dones", done_buf),
                               ("alive", alive_buf))}
    extras = {a: {k: np.stack(v) for k, v in extra_buf[a].items()} for a in ids}
    values, next_values, advantages, returns = {}, {}, {}, {}
    for a in ids:
        if "value" not in extras[a]:
            raise TypeError(f"{type(agent).__name__}.act must return extras[{a!r}]['value'] for on-policy training")
        v = extras[a]["value"].astype(np.float32)
        nv = np.concatenate([v[1:], np.asarray(last_values[a], dtype=np.float32)[None]], axis=0)
        for t, truncated, fixed in next_value_fix:
            nv[t] = np.where(truncated[a], fixed[a], nv[t])
        values[a], next_values[a] = v, nv
        advantages[a], returns[a] = compute_gae(stack["rewards"][a], v, nv, stack["terminated"][a],
                                                stack["dones"][a], gamma, gae_lambda)
    rollout = Rollout(stack["obs"], stack["next_obs"], stack["actions"], stack["rewards"], stack["terminated"],
                      stack["dones"], stack["alive"], extras, values, next_values, advantages, returns)
    return rollout, obs, episodes


class OnPolicyStrategy(BaseStrategy):
    """Collect a rollout, learn from it, repeat; with ``algo.overlap_update`` the learning of one rollout
    runs beside the collection of the next.

    Overlap: the learner updates the agent's networks in place in a worker thread, so the envs are acted
    on by a second agent built the same way (``behaviour``), which loads ``learner.weights()`` after each
    update and otherwise keeps its own sampling stream. The rollout collected during an update waits for
    the next ``step`` (``self._ahead``). A checkpoint never holds one: ``state_dict`` first learns from
    it (and from an update still running), so a resumed run and the run that wrote the checkpoint go on
    from the same state and stay identical; the schedule, not the machine's timing, decides every step.
    """

    family = StrategyFamily.ON_POLICY

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.behaviour: Agent | None = None
        self._ahead: Rollout | None = None
        self._learning: Future | None = None
        self._pool: ThreadPoolExecutor | None = None

    def _collect(self, agent: Agent, limit: int) -> tuple[Rollout, list[dict[str, float]]]:
        config = self.context.config
        steps = max(1, min(config.rollout_steps, -(-limit // self.envs.num_envs)))
        rollout, self.obs, episodes = collect_rollout(self.envs, agent, self.obs, steps, self.tracker,
                                                      config.gamma, config.gae_lambda)
        return rollout, episodes

    def _learn(self, rollout: Rollout) -> dict[str, float]:
        return plugin_call(self.algorithm, "learn()", self.learner.learn, rollout)

    def step(self, limit: int) -> StepResult:
        if getattr(self.context.config, "overlap_update", False):
            return self._overlapped_step(limit)
        rollout, episodes = self._collect(self.agent, limit)
        metrics = self._learn(rollout)
        metrics.update(self.agent.metrics())
        return StepResult(rollout.num_steps, metrics, episodes)

    # -- overlap_update ------------------------------------------------------------------------------
    def _overlapped_step(self, limit: int) -> StepResult:
        behaviour = self._behaviour()
        episodes: list[dict[str, float]] = []
        collected = 0
        rollout, self._ahead = self._ahead, None
        if rollout is None:  # the first step, or the first after a checkpoint: nothing to learn beside yet
            rollout, episodes = self._collect(behaviour, limit)
            collected = rollout.num_steps
        if limit - collected <= 0:  # the budget ends with this rollout: nothing to collect beside its update
            metrics = self._learn(rollout)
            self._give_weights()
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlf-learner")
            self._learning = self._pool.submit(plugin_call, self.algorithm, "learn()", self.learner.learn, rollout)
            try:
                self._ahead, more = self._collect(behaviour, limit - collected)
            finally:
                metrics = self._join()  # also when collection failed: the update is never left running
            collected += self._ahead.num_steps
            episodes.extend(more)
        metrics.update(behaviour.metrics())
        return StepResult(collected, metrics, episodes)

    def _behaviour(self) -> Agent:
        if self.behaviour is None:
            if type(self.learner).weights is Learner.weights:
                raise ConfigError(
                    f"algo.overlap_update=true: algorithm {getattr(self.algorithm, 'name', '?')!r} has no "
                    "Learner.weights() that leaves out the agent's sampling state, which the acting copy "
                    "loads after every update; set algo.overlap_update=false")
            agent = plugin_call(self.algorithm, "build_agent", self.algorithm.build_agent, self.context)
            agent.load_state_dict(self.agent.state_dict())  # the same weights and sampling stream
            self.behaviour = agent
        return self.behaviour

    def _join(self) -> dict[str, float]:
        """The running update's metrics once it is done, the acting copy given its weights; {} if none ran."""
        learning, self._learning = self._learning, None
        if learning is None:
            return {}
        try:
            metrics = learning.result()
        except BaseException:
            if not learning.done():  # interrupted while waiting: keep it, a checkpoint waits for it again
                self._learning = learning
            raise
        self._give_weights()
        return metrics

    def _give_weights(self) -> None:
        self.behaviour.load_state_dict(self.learner.weights())

    def _settle(self) -> None:
        """No update running and no rollout waiting: what a checkpoint must hold. The metrics of an update
        made here are not logged: a resumed run could not log them, and its rows must equal the original's."""
        self._join()
        if self._ahead is not None:
            rollout, self._ahead = self._ahead, None
            self._learn(rollout)
            self._give_weights()

    def state_dict(self) -> StateTree:
        if self.behaviour is None:
            return super().state_dict()
        self._settle()
        state = super().state_dict()
        # the copy that acted holds the sampling stream; its weights are the learner's after _settle
        state["agent"] = self.behaviour.state_dict()
        return state

    def teardown(self) -> None:
        try:
            self._learning = None
            if self._pool is not None:
                self._pool.shutdown(wait=True)  # an update still running ends first
                self._pool = None
        finally:
            super().teardown()

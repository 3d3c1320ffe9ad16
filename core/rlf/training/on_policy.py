"""On-policy: roll the vector env out for ``rollout_steps``, compute GAE, learn once, discard.

With ``async_workers > 0`` (A3C), each worker process owns its own envs and seed and runs the very
same rollout + learn on a model the learner placed in shared memory; the Trainer in the main process
still owns the budget, checkpoints and stats, and this strategy relays the workers' reports. Workers
claim their env steps from the budget before collecting them, so together they do exactly the steps
the Trainer counts, and they stop by themselves when it is spent.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Iterator

import numpy as np

from ..envs import StepBatch, VectorEnv, make_vector_env
from ..interfaces import Acting, Agent, AgentArrays, Rollout
from ..plugins import StrategyFamily
from .strategy import BaseStrategy, EpisodeTracker, StepResult


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
    family = StrategyFamily.ON_POLICY

    def setup(self) -> None:
        super().setup()
        self.workers: list[mp.Process] = []
        if self.context.config.async_workers:
            self._start_workers(self.context.config.async_workers)

    def step(self, limit: int) -> StepResult:
        if self.workers:
            return self._step_async(limit)
        config = self.context.config
        steps = max(1, min(config.rollout_steps, -(-limit // self.envs.num_envs)))
        rollout, self.obs, episodes = collect_rollout(self.envs, self.agent, self.obs, steps, self.tracker,
                                                      config.gamma, config.gae_lambda)
        metrics = self.learner.learn(rollout)
        metrics.update(self.agent.metrics())
        metrics.update(self.collector_metrics())
        return StepResult(rollout.num_steps, metrics, episodes)

    # -- asynchronous workers ------------------------------------------------------------------
    def _start_workers(self, count: int) -> None:
        ctx = mp.get_context("fork")  # workers inherit the learner's shared-memory model
        self.reports = ctx.Queue(maxsize=4 * count)
        self.stop_event = ctx.Event()
        # Workers claim env steps from this allowance before each rollout, so all of them together
        # collect (and learn from) exactly the budget the Trainer asks for, not a queue's worth more.
        self.allowance = ctx.Value("q", 0)
        self.budget_granted = ctx.Event()
        self._next_health_check = 0.0
        base_seed = self.context.run.seed + 7919 * self._reset_count
        for index in range(count):
            process = ctx.Process(target=_async_worker, name=f"rlf-worker-{index}", daemon=True,
                                  args=(self, index, base_seed + 1000 * (index + 1)))
            process.start()
            self.workers.append(process)

    def _step_async(self, limit: int) -> StepResult:
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
                    raise RuntimeError("async workers all stopped before the step budget was spent") from None
                continue
            if kind == "error":
                index, summary, details = payload
                raise RuntimeError(f"async worker {index} failed: {summary}\n--- worker traceback ---\n{details}")
            steps, metrics, episodes = payload
            for row in episodes:  # renumber: every worker counts its own episodes
                self.tracker.episodes += 1
                row["episode"] = float(self.tracker.episodes)
            return StepResult(steps, metrics, episodes)

    def _check_workers(self) -> None:
        crashed = [f"{p.name} (exit code {p.exitcode})" for p in self.workers
                   if not p.is_alive() and p.exitcode not in (0, None)]
        if crashed:
            raise RuntimeError(f"async workers died without a report: {', '.join(crashed)}; a native crash "
                               "(segfault) or the out-of-memory killer ends a worker this way")

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


def _claim_steps(strategy: OnPolicyStrategy, num_envs: int) -> int:
    """Steps per env this worker may collect next; 0 once the budget is spent or training stops."""
    while not strategy.budget_granted.wait(timeout=0.2):
        if strategy.stop_event.is_set():
            return 0
    if strategy.stop_event.is_set():
        return 0
    with strategy.allowance.get_lock():
        take = min(strategy.context.config.rollout_steps * num_envs, strategy.allowance.value)
        strategy.allowance.value -= take
    return -(-take // num_envs)


def _send(strategy: OnPolicyStrategy, item: tuple) -> bool:
    while not strategy.stop_event.is_set():
        try:
            strategy.reports.put(item, timeout=0.2)
            return True
        except queue.Full:
            continue
    return False


def _async_worker(strategy: OnPolicyStrategy, index: int, seed: int) -> None:
    """One worker: its own envs and seed, the shared learner, reports to the main process.

    ``context.seed`` is set to this worker's seed before ``learner.worker_init()``, so a learner that
    kept its BuildContext can seed its own random streams differently in every worker.
    """
    try:
        strategy.context.seed = seed
        strategy.learner.worker_init()
        run = strategy.context.run
        envs = make_vector_env(strategy.env_name, strategy.env_factory, run.num_envs, subprocess=False)
        tracker = EpisodeTracker(envs.spec.agent_ids, envs.num_envs, envs.spec.multi_agent)
        obs = envs.reset(seed=seed)
        config = strategy.context.config
        try:
            while steps := _claim_steps(strategy, envs.num_envs):
                rollout, obs, episodes = collect_rollout(envs, strategy.agent, obs, steps, tracker,
                                                         config.gamma, config.gae_lambda)
                metrics = strategy.learner.learn(rollout)
                if not _send(strategy, ("report", (rollout.num_steps, metrics, episodes))):
                    break
        finally:
            envs.close()
    except Exception as exc:  # noqa: BLE001 - reported to the main process, which raises it
        _send(strategy, ("error", (index, f"{type(exc).__name__}: {exc}", traceback.format_exc())))
    if strategy.stop_event.is_set():
        strategy.reports.cancel_join_thread()  # nobody will read what is still buffered

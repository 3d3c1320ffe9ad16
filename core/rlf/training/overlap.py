"""``algo.overlap_update``: the on-policy strategy that learns from one rollout while it collects the next.

The learner updates the agent's networks in place in a worker thread, so the envs are acted on by a
second agent built the same way (``behaviour``), which loads ``learner.weights()`` after each update
and otherwise keeps its own sampling stream. The rollout collected during an update waits for the next
``step`` (``_ahead``), in a checkpoint too (``ahead``): a checkpoint changes nothing of what the run
does next, so a resumed run and one never stopped stay identical, and the schedule, not the machine's
timing, decides every step. A stop signal lets the step (a rollout beside an update) finish first.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from rlf.errors import ConfigError
from rlf.interfaces import Agent, Learner, StateTree, StepResult
from rlf.training.on_policy import OnPolicyStrategy
from rlf.training.startup import learn_call, plugin_call


def on_policy_strategy(algorithm, env_name, env_factory, context, collector) -> OnPolicyStrategy:
    """What the ``on-policy`` family builds: the plain strategy, or the overlapped one where
    ``algo.overlap_update`` is true (chosen here, so the plain loop holds no branch for the option)."""
    cls = OverlappedOnPolicyStrategy if getattr(context.config, "overlap_update", False) else OnPolicyStrategy
    return cls(algorithm, env_name, env_factory, context, collector)


class OverlappedOnPolicyStrategy(OnPolicyStrategy):
    """What ``OnPolicyStrategy`` builds where ``algo.overlap_update`` is true (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.behaviour: Agent | None = None
        self._learning: Future | None = None
        self._pool: ThreadPoolExecutor | None = None

    def step(self, limit: int) -> StepResult:
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
            self._learning = self._pool.submit(learn_call, self.algorithm, self.learner.learn, rollout)
            try:
                self._ahead, more = self._collect(behaviour, limit - collected)
            finally:
                metrics = self._join()  # also when collection failed: the update is never left running
            collected += self._ahead.num_steps
            episodes.extend(more)
            if limit - collected <= 0:  # the budget ends here: no rollout may wait for an update never made
                ahead, self._ahead = self._ahead, None
                self._learn(ahead)
                self._give_weights()
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

    def state_dict(self) -> StateTree:
        self._join()  # an update still running (a stop that did not wait): the checkpoint holds its result
        state = super().state_dict()
        if self.behaviour is not None:
            # the copy that acted holds the sampling stream; its weights are the learner's since the last join
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

"""The contracts between the core and a plugin: what an agent and a learner are, and the data they swap.

Every environment is seen through one shape: a dict keyed by agent id, each value batched over the
vector of envs. A Gymnasium env has the single agent id ``"agent"``; a PettingZoo parallel env has its
own ids. So an algorithm written once runs on both, and independent multi-agent learning (PPAGE's predator-prey baselines)
is simply one model per key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import gymnasium

    from rlf.config import AlgorithmConfig, RunConfig

SINGLE_AGENT = "agent"

EPISODE_METRICS = "episode_metrics"
"""Key of the dict of floats an environment puts in ``info`` on the step that ends an episode."""

AgentArrays = dict[str, np.ndarray]
"""One array per agent id, leading axis = env index (or time, env for rollouts)."""


class AgentBatch(dict):
    """AgentArrays that also hold every agent's rows as one array: ``stacked[r]`` is the array of the
    ``r``-th key (dict order), so ``stacked`` has shape (agents, N, ...).

    Collectors hand these out where every agent's arrays share shape and dtype (``ParallelVector``);
    an agent or learner may read ``stacked`` to do one numpy call for all agents instead of one per
    agent, and may return its actions this way for the same reason. It is a plain dict to everyone
    else: code that ignores ``stacked`` sees no difference. Read-only, like every batch array.
    """

    __slots__ = ("ids", "stacked")

    ids: tuple[str, ...]
    """The keys in row order: batches built from one tuple share it, so code that combines several
    batches row by row can check that they agree with ``is`` before ``==``."""
    stacked: np.ndarray

    @classmethod
    def of(cls, ids: tuple[str, ...], stacked: np.ndarray) -> AgentBatch:
        """The batch whose ``r``-th key ``ids[r]`` holds the view ``stacked[r]``."""
        # built item by item: cheaper than iterating a numpy array or an __init__ of our own, and
        # collectors build two of these per env step
        batch = cls()
        for r, agent in enumerate(ids):
            batch[agent] = stacked[r]
        batch.ids = ids
        batch.stacked = stacked
        return batch

    def __reduce__(self):  # pickles (to actor processes) as the plain dict it extends
        return dict, (dict(self),)


StateTree = dict[str, Any]
"""Nested dicts/lists of numpy arrays, numbers, strings, bools and None: what checkpoints hold."""


@dataclass
class StepResult:
    """What one ``TrainStrategy.step`` did; the Trainer adds ``env_steps`` to its counters, writes
    ``metrics`` into the next metrics row (averaged with other steps' since the last row) and hands
    ``episodes`` to the loggers."""

    env_steps: int
    """Env steps taken in this step, all envs together (N envs stepped T times: N * T)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The learner's numbers (losses, entropy...) of this step, if it learned."""
    episodes: list[dict[str, float]] = field(default_factory=list)
    """One row per episode that ended: return(s), length, env metrics, as ``EpisodeTracker.update``
    returns them (the strategy calls it after every env step; the Trainer never sees raw steps)."""
    partial: bool = False
    """The step stopped early at a held stop signal (``TrainStrategy.stop_requested``), its unfinished
    unit kept in the strategy's ``state_dict`` and finished by the next ``step``, which reports it all:
    a partial step reports nothing (``StepResult(0, partial=True)``) and the Trainer checkpoints and stops."""


@dataclass(frozen=True)
class Resume:
    """What every plugin is told when training continues from a checkpoint (``on_resume``): where the run
    stands and whether the episodes under way were restored or restarted.

    It comes after ``setup`` (the strategy has built and restored everything) and before the first step
    and ``on_start``: counters, schedules and weights are already the checkpoint's. A fresh run gets no
    ``on_resume``. Rows a killed run logged after ``env_step`` are not part of the run any more: a logger
    cuts its own files back to it, as the core's CSV and TensorBoard loggers do."""

    env_step: int
    """The checkpoint's env step: training continues from here."""
    iterations: int
    """Strategy steps done so far (a rollout and its update, or a chunk of off-policy steps)."""
    episodes: int
    """Episodes finished so far."""
    episodes_restored: bool
    """True where the episodes under way at the checkpoint continue (exact resume: ``vector=sync`` and
    envs with ``get_state``/``set_state``); False where fresh ones were started, so per-episode state a
    plugin keeps (n-step buffers, eligibility traces, per-env accumulators) must be dropped."""
    reason: str | None = None
    """Why fresh episodes were started (None where they were restored); the same text the console shows."""


@dataclass(frozen=True)
class EnvSpec:
    """What builders learn about the environment before any agent exists."""

    name: str
    agent_ids: tuple[str, ...]
    observation_spaces: dict[str, gymnasium.Space]
    action_spaces: dict[str, gymnasium.Space]
    multi_agent: bool
    num_envs: int
    metadata: dict[str, Any] = field(default_factory=dict)
    """Environment extras, e.g. ``teams`` (agent id -> team) or an ``encoder`` for tabular learners."""


@dataclass
class BuildContext:
    """Everything ``build_agent`` and ``build_learner`` receive."""

    env_spec: EnvSpec
    config: AlgorithmConfig
    run: RunConfig
    seed: int
    device: str
    """The resolved torch device string ("cpu", "cuda", ...); the core itself never imports torch."""
    env_factory: Any = None
    """A picklable zero-argument callable building one more copy of the environment (A3C workers)."""


@dataclass
class Acting:
    """What ``Agent.act`` returns: actions per agent plus anything the learner needs later."""

    actions: AgentArrays
    extras: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    """Per agent, e.g. ``{"log_prob": (N,), "value": (N,)}``; stored alongside the rollout."""


@dataclass
class Rollout:
    """A fixed-length on-policy rollout. Per agent: arrays shaped (T, N, ...), T steps by N envs."""

    obs: AgentArrays
    next_obs: AgentArrays
    """The observation after each step; at an episode end, the final observation (not the reset one)."""
    actions: AgentArrays
    rewards: AgentArrays
    terminated: AgentArrays
    """True terminal: the bootstrap is cut."""
    dones: AgentArrays
    """Episode (or this agent's part in it) ended, terminated or truncated: the GAE chain is cut."""
    alive: AgentArrays
    """False where the agent was not in the episode (e.g. a captured prey): mask those steps out."""
    extras: dict[str, dict[str, np.ndarray]]
    values: AgentArrays
    next_values: AgentArrays
    """V(next_obs) from the acting agent, so truncated steps bootstrap from the final observation."""
    advantages: AgentArrays
    returns: AgentArrays

    @property
    def num_steps(self) -> int:
        first = next(iter(self.rewards.values()))
        return int(first.shape[0] * first.shape[1])


@dataclass
class Transitions:
    """One env step of every env, as the off-policy strategy hands it to the learner (arrays (N, ...))."""

    obs: AgentArrays
    actions: AgentArrays
    rewards: AgentArrays
    next_obs: AgentArrays
    """At an episode end, the final observation (not the reset one)."""
    terminated: AgentArrays
    truncated: AgentArrays
    alive: AgentArrays
    """False where the agent took no part in this step; its row carries no information."""
    episode_ended: np.ndarray
    """(N,) bool: the env's whole episode ended at this step."""


POLICY_HEADS = ("categorical", "q_values", "squashed_gaussian", "gaussian")
"""What an exported policy module returns, and so how its greedy action and its samples are made:

- ``categorical``: logits (N, n); greedy is the argmax, a sample draws from softmax(logits).
- ``q_values``: action values (N, n); greedy is the argmax (an epsilon-greedy agent explores around it).
- ``squashed_gaussian``: (mean, log_std), each (N, dim), of a Gaussian before tanh; the action is
  tanh(u) * scale + center, greedy at u = mean (SAC's policy).
- ``gaussian``: (mean, log_std) of a Gaussian in action units; greedy is the mean clipped to the bounds.
"""


@dataclass(frozen=True)
class PolicyExport:
    """One agent id's policy as a module ``rlf export --format onnx`` can trace: ``module(obs)`` takes a
    batch of observations exactly as the environment gives them (dtype and shape of the space, pixels as
    uint8) and returns ``head``'s outputs (``POLICY_HEADS``). Everything acting does to an observation
    (scaling, one-hot, normalisation statistics) belongs inside the module, so the exported file needs
    nothing of rlf."""

    module: Any
    """A ``torch.nn.Module``; typed loosely so that the core imports without torch."""
    head: str

    def __post_init__(self) -> None:
        if self.head not in POLICY_HEADS:
            raise ValueError(f"unknown policy head {self.head!r}; one of {', '.join(POLICY_HEADS)}")


class Agent(ABC):
    """Acts on batched observations. Independent of how it is trained."""

    rows_independent: bool = False
    """True if ``act`` treats each env's row on its own and nothing but the weights (no per-env
    memory, nothing ``reset_state`` or ``on_progress`` changes) decides how it acts. The on-policy
    strategy may then act on some envs while others step (subprocess envs): same results per row,
    less waiting."""

    @abstractmethod
    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        """Actions for every agent id in ``obs``; ``explore=False`` is greedy (evaluation)."""

    def value(self, obs: AgentArrays) -> AgentArrays:
        """State values per agent; on-policy agents must implement it for GAE bootstrapping."""
        raise NotImplementedError(f"{type(self).__name__} has no value function")

    def on_progress(self, env_steps: int, episodes_ended: int) -> None:  # noqa: B027 - optional hook
        """Called by the strategy after each step; exploration schedules advance here."""

    def reset_state(self, env_mask: np.ndarray) -> None:  # noqa: B027 - optional hook
        """Episodes ended in the envs where ``env_mask`` is True (for per-episode state such as memories)."""

    def metrics(self) -> dict[str, float]:
        """Scalars worth logging (e.g. epsilon)."""
        return {}

    def on_resume(self, resume: Resume) -> None:  # noqa: B027 - optional hook
        """Training continues from a checkpoint (after ``load_state_dict``); where
        ``resume.episodes_restored`` is False, every env starts a new episode: drop per-episode state."""

    def export_policy(self, agent_id: str) -> PolicyExport:
        """The policy of ``agent_id`` for ``rlf export --format onnx`` (optional: an agent without one
        cannot be exported; one with per-episode memory needs inputs a feed-forward export lacks)."""
        raise NotImplementedError(f"{type(self).__name__} has no exportable policy")

    @abstractmethod
    def state_dict(self) -> StateTree: ...

    @abstractmethod
    def load_state_dict(self, state: StateTree) -> None: ...


class Learner(ABC):
    """Turns experience into updates of its agent. On-policy learners receive a ``Rollout``,
    off-policy learners receive ``Transitions`` every env step (and keep their own replay)."""

    agent: Agent

    @abstractmethod
    def learn(self, experience: Rollout | Transitions) -> dict[str, float]:
        """Update from the experience; return scalar metrics (losses, table sizes...)."""

    def weights(self) -> StateTree:
        """What evaluation needs: by default the agent's state."""
        return self.agent.state_dict()

    @abstractmethod
    def state_dict(self) -> StateTree:
        """Everything a resume needs beyond the agent: optimizers, counters, RNGs, and replay unless the
        run sets ``save_replay = false`` (``context.run.save_replay``, read when the learner is built)."""

    @abstractmethod
    def load_state_dict(self, state: StateTree) -> None: ...

    def on_resume(self, resume: Resume) -> None:  # noqa: B027 - optional hook
        """Training continues from a checkpoint (after ``load_state_dict``); where
        ``resume.episodes_restored`` is False, transitions in flight (an n-step buffer) belong to episodes
        that will never continue: drop them."""

    def worker_init(self) -> None:  # noqa: B027 - optional hook
        """Called first in a worker process (async strategies), e.g. to limit torch to one thread."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release processes or files the learner started."""


def spaces_of(spec: EnvSpec, agent_id: str) -> tuple[gymnasium.Space, gymnasium.Space]:
    return spec.observation_spaces[agent_id], spec.action_spaces[agent_id]

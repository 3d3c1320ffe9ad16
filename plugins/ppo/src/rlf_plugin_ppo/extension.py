"""The extension point for plugins that change PPO's update (ICM, RND, kNN episodic novelty).

A curiosity plugin registers PPO's ``build_agent`` unchanged and a ``build_learner`` that returns
``PPOLearner(..., extension=MyExtension(...))``. PPO calls the hooks below at fixed points of its
update, so the curiosity plugin never copies PPO's loop, losses or rollout code.

Order within one ``PPOLearner.learn(rollout)``:
  1. ``intrinsic_rewards(rollout)``: per agent (T, N) rewards, already scaled; PPO adds them to the
     extrinsic rewards and recomputes GAE with ``rlf.compute_gae`` (same terminated/truncated rule).
  2. ``extra_advantages(rollout)``: per agent (T, N) advantages added to PPO's after step 1 (RND: from
     its own intrinsic value head, discount and non-episodic returns).
  3. for every epoch and minibatch: PPO's loss + ``loss(minibatch)``; one optimizer step over PPO's
     parameters and ``parameters()``.
  4. ``metrics()`` are merged into PPO's returned metrics (log intrinsic and extrinsic separately).

What PPOLearner guarantees beyond that (the hooks and their order are unchanged; these are
clarifications written down with the implementation):
  * ``bind(learner)`` runs in ``PPOLearner.__init__`` before ``parameters()`` is read, so an extension
    may build its modules in ``bind`` (on ``learner.device``). torch's global RNG is seeded from the
    run seed just before ``bind``.
  * Hooks 1 and 2 both receive the rollout exactly as the core produced it (extrinsic rewards, the
    core's advantages and returns). PPO's value head learns the returns of step 1 (extrinsic plus
    intrinsic rewards); step 2's advantages change the policy's advantages only.
  * ``learner.last_advantages`` / ``learner.last_returns`` hold the targets of the latest update.
  * Advantage normalisation (``normalize_advantages``) runs after step 2, per agent.
  * Step 3 runs per agent id (one independent network each): ``Minibatch.agent_id`` names it. Steps
    where ``rollout.alive`` is False are left out of every minibatch; ``indices`` still point into the
    full flattened (T*N) rollout. ``actions`` are 0-based indices even if the Discrete space starts
    elsewhere. With ``target_kl`` an agent's loop may stop early, so ``loss`` can run fewer times.
  * The loss metrics ``loss`` returns are averaged over minibatches and merged like ``metrics()``.
  * The extension's ``state_dict()`` is stored inside the learner's checkpoint state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

    from rlf import BuildContext, Rollout


def flat(array: np.ndarray) -> np.ndarray:
    """(T, N, ...) -> (T*N, ...): a rollout array in the order ``Minibatch.indices`` refer to."""
    return array.reshape(array.shape[0] * array.shape[1], *array.shape[2:])


@dataclass
class Minibatch:
    """One minibatch of one agent's flattened rollout, as torch tensors on the learner's device."""

    agent_id: str
    obs: torch.Tensor
    next_obs: torch.Tensor
    actions: torch.Tensor
    indices: torch.Tensor
    """Positions in the flattened (T*N) rollout, to look up per-sample data the extension computed."""
    dones: torch.Tensor


class ReturnScale:
    """Divides intrinsic rewards by a running std of their discounted return (Burda et al. 2018,
    "Large-Scale Study of Curiosity-Driven Learning"), so a bonus whose raw size drifts by orders of
    magnitude during training keeps one scale. The return runs across episode ends (non-episodic):
    it only measures the reward's size, whatever the learner's own discounting does with it."""

    def __init__(self, num_envs: int, gamma: float):
        from rlf import RunningNormalizer

        self.gamma = gamma
        self.running = np.zeros(num_envs, dtype=np.float64)
        self.stats = RunningNormalizer(clip=None)

    @property
    def std(self) -> float:
        return float(np.sqrt(self.stats.var))

    def __call__(self, raw: np.ndarray, alive: np.ndarray) -> np.ndarray:
        """(T, N) raw rewards (0 where not alive) -> the same divided by the updated return std."""
        running, returns = self.running, np.empty_like(raw, dtype=np.float64)
        for t in range(raw.shape[0]):
            running = running * self.gamma + raw[t]
            returns[t] = running
        self.running = running
        self.stats.update(returns[alive].reshape(-1))
        return (raw / np.sqrt(self.stats.var + 1e-8)).astype(np.float32)

    def state_dict(self) -> dict[str, Any]:
        return {"return_stats": self.stats.state_dict(), "running_returns": self.running.copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.stats.load_state_dict(state["return_stats"])
        self.running = np.array(state["running_returns"], dtype=np.float64)


class PPOExtension:
    """Override what you need; every default is a no-op."""

    def bind(self, learner: Any) -> None:
        """Called once by PPOLearner.__init__ (gives access to learner.device, learner.config, learner.agent)."""
        self.learner = learner

    def parameters(self) -> Iterable[torch.nn.Parameter]:
        """Extra trainable parameters, optimized together with PPO's."""
        return []

    def intrinsic_rewards(self, rollout: Rollout) -> dict[str, np.ndarray] | None:
        return None

    def extra_advantages(self, rollout: Rollout) -> dict[str, np.ndarray] | None:
        return None

    def loss(self, minibatch: Minibatch) -> tuple[torch.Tensor | None, dict[str, float]]:
        return None, {}

    def metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def per_agent_modules(context: BuildContext, seed_offset: int,
                      build: Callable[[str], torch.nn.Module]) -> tuple[dict[str, str], torch.nn.ModuleDict]:
    """An extension's own module per agent id, as ICM, RND and kNN build theirs: keyed ``agent0``,
    ``agent1``... (agent ids need not be identifiers; these keys are the checkpoint's), initialised
    from the run seed plus ``seed_offset`` inside a forked RNG (so building them does not shift the
    policy's initialisation), on the run's device. Returns (agent id -> key, the modules)."""
    import torch

    from rlf.nn.torch_utils import resolve_device

    keys = {agent: f"agent{index}" for index, agent in enumerate(context.env_spec.agent_ids)}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(context.seed + seed_offset)
        modules = torch.nn.ModuleDict({keys[agent]: build(agent) for agent in context.env_spec.agent_ids})
    return keys, modules.to(resolve_device(context.device))

"""The update, and how asynchronous workers share it.

Each worker process (forked by the core's on-policy strategy when ``async_workers > 0``) collects
n-step rollouts with its own envs and seed, computes the loss and gradients on its own, and applies
them to the ONE model: parameters, Adam's moments and step counts, and the return statistics are
placed in shared memory here, before the fork. Gradients stay private to each worker. Only the
short optimizer step and statistics update run under a lock (a consistent Adam step per update);
acting, the forward and backward passes run in parallel, reading parameters other workers may be
changing, as in the original A3C.

With the defaults the core hands over, per agent and step t of a rollout, n-step returns cut at
episode ends (bootstrapped from the final observation on truncation, not on termination) and
``advantages = returns - V(s_t)``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp

import torch
from rlf_plugin_actor_critic.learner import ActorCriticLearner

from rlf import BuildContext, StateTree
from rlf.nn import set_threads

from .model import A3CAgent, holding


class A3CLearner(ActorCriticLearner):
    """rlf-plugin-actor-critic's update, with Adam, on a model and statistics the workers share."""

    def __init__(self, context: BuildContext, agent: A3CAgent):
        self.context = context
        self.lock = None
        self._updates = torch.zeros((), dtype=torch.int64)
        # One Adam per agent (independent learners, from make_optimizer), shared by every worker.
        super().__init__(agent, context.config)
        if self.config.async_workers:
            agent.share_memory()
            self._share_optimizer_state()
            self._updates.share_memory_()
            self.lock = mp.get_context("fork").Lock()
            agent.update_lock = self.lock

    def make_optimizer(self, net: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(net.parameters(), lr=self.config.lr)

    def _share_optimizer_state(self) -> None:
        # Adam creates its state lazily at the first step, which would happen in a worker, in private
        # memory; so create it now (as Adam would) and move it to shared memory.
        for optimizer in self.optimizers.values():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    state = optimizer.state[param]
                    if not state:
                        state["step"] = torch.tensor(0.0)
                        state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                    for value in state.values():
                        if isinstance(value, torch.Tensor):
                            value.share_memory_()

    @property
    def updates(self) -> int:
        """Updates applied to the shared model, by every worker together."""
        return int(self._updates)

    @updates.setter
    def updates(self, value: int) -> None:
        self._updates.fill_(value)  # in place: the counter may be in shared memory

    def _shared(self) -> contextlib.AbstractContextManager:
        return holding(self.lock)

    def worker_init(self) -> None:
        # Forked workers that use torch's inherited thread pool can deadlock; one thread each is also
        # the fastest for these small networks. The core set context.seed to this worker's own seed.
        set_threads(1)
        torch.manual_seed(self.context.seed)
        self.agent.generator.manual_seed(self.context.seed)

    def load_state_dict(self, state: StateTree) -> None:
        super().load_state_dict(state)
        if self.lock is not None:
            self._share_optimizer_state()  # loading replaced the state tensors with private ones

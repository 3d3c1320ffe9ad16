"""A3C acts exactly like the one-step actor-critic (rlf-plugin-actor-critic), on networks, return
statistics and a lock that the workers share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from rlf_plugin_actor_critic.model import RETURN_CLIP, RETURN_MIN_STD, ActorCriticAgent

from rlf import EnvSpec, RunningNormalizer, StateTree

from .config import A3CConfig

__all__ = ["RETURN_CLIP", "A3CAgent", "holding"]


class A3CAgent(ActorCriticAgent):
    algorithm = "a3c"

    def __init__(self, spec: EnvSpec, config: A3CConfig, seed: int, device: torch.device):
        super().__init__(spec, config, seed, device)
        self.update_lock = None
        """Set by the learner when workers share this agent: held while the shared model changes."""
        self._shared_buffers: list[torch.Tensor] = []

    def share_memory(self) -> None:
        """Move the networks and the return statistics into shared memory, before the workers fork."""
        for net in self.nets.values():
            net.share_memory()
        for agent_id, normalizer in list(self.normalizers.items()):
            shared = torch.zeros(RunningNormalizer.buffer_size(), dtype=torch.float64).share_memory_()
            buffer = shared.numpy()  # a view: numpy reads and writes the shared pages
            buffer[:] = normalizer.buffer
            self._shared_buffers.append(shared)
            self.normalizers[agent_id] = RunningNormalizer(clip=RETURN_CLIP, min_std=RETURN_MIN_STD, buffer=buffer)

    def state_dict(self) -> StateTree:
        with holding(self.update_lock):
            return super().state_dict()


@contextmanager
def holding(lock, timeout: float = 10.0) -> Iterator[None]:
    """Hold ``lock`` (if any) for a consistent snapshot, but never wait forever: a worker killed while
    holding it must not hang the main process's final checkpoint."""
    acquired = lock.acquire(timeout=timeout) if lock is not None else False
    try:
        yield
    finally:
        if acquired:
            lock.release()

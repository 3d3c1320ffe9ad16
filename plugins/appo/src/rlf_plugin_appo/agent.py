"""APPO acts with PPO's agent; this subclass only adds what the actor-learner exchange needs: the
weights version each action was taken with, and loading a weights push without touching the actor's
own sampling stream."""

from __future__ import annotations

import numpy as np
from rlf_plugin_ppo.model import PPOAgent, snapshot

from rlf import Acting, AgentArrays, StateTree
from rlf.nn.torch_utils import to_torch_tree

VERSION_KEY = "policy_version"
"""``Acting.extras`` key: the learner update count of the weights that chose the action."""


class APPOAgent(PPOAgent):
    """PPO's agent (same networks, same checkpoint format: ``rlf eval`` reads an APPO run like a PPO
    one) that stamps every action with the version of the weights it acted with."""

    version = 0

    def act(self, obs: AgentArrays, *, explore: bool = True) -> Acting:
        acting = super().act(obs, explore=explore)
        for agent_id, extras in acting.extras.items():
            # the learner measures staleness per step: a chunk is acted with one version, but this
            # costs nothing and stays right if an actor ever loads weights mid-chunk
            extras[VERSION_KEY] = np.full(len(obs[agent_id]), self.version, dtype=np.int64)
        return acting

    def push_state(self, version: int) -> StateTree:
        """What actors load: the networks and the version, not the sampling generator (each actor keeps
        its own seeded stream; the learner's would make them all draw the same numbers)."""
        return {"version": int(version),
                "networks": {agent_id: snapshot(network.state_dict()) for agent_id, network in self.networks.items()}}

    def load_state_dict(self, state: StateTree) -> None:
        if "generator" in state:  # a checkpoint's full state
            super().load_state_dict(state)
            return
        for agent_id, network in self.networks.items():
            network.load_state_dict(to_torch_tree(state["networks"][agent_id], self.device))
            if agent_id in self.numpy_acting:
                self.numpy_acting[agent_id].refresh()
        self.version = int(state["version"])

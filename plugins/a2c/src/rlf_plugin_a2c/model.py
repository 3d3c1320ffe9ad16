"""A2C acts exactly like the one-step actor-critic (rlf-plugin-actor-critic): same networks, same
agent. Only the update differs (n-step targets, separate learning rates)."""

from __future__ import annotations

from rlf_plugin_actor_critic.model import RETURN_CLIP, ActorCriticAgent

__all__ = ["RETURN_CLIP", "A2CAgent"]


class A2CAgent(ActorCriticAgent):
    algorithm = "a2c"

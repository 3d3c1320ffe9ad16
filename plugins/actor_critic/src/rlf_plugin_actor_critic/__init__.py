"""rlf-plugin-actor-critic: one-step TD actor-critic with return normalisation (PPAGE's ActorCritic)."""

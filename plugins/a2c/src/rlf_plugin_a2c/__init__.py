"""rlf-plugin-a2c: synchronous n-step advantage actor-critic (PPAGE's A2C)."""

"""rlf-plugin-a3c: asynchronous advantage actor-critic (PPAGE's A3C) on the core's async workers."""

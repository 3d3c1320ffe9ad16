"""The training loop (``trainer``), the strategy contract and its parts (episodes, start-up, supervision),
the on- and off-policy strategy families, and the replay and exploration pieces their algorithms share."""

"""rlf-plugin-appo: asynchronous PPO (APPO) on the ``actor-learner`` strategy family."""

"""rlf-plugin-reinforce: REINFORCE, the docs' tutorial plugin (docs/tutorial.md)."""

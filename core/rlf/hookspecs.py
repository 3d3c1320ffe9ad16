"""The plugin contract: a plugin implements one or both hooks and registers through the callback."""

import pluggy

hookspec = pluggy.HookspecMarker("rlf")
hookimpl = pluggy.HookimplMarker("rlf")


@hookspec
def rlf_register_algorithms(register):
    """Call ``register(name, *, build_agent, build_learner, family, config, ...)`` once per algorithm.

    Builders may be given as ``"package.module:function"`` strings, imported on first use."""


@hookspec
def rlf_register_environments(register):
    """Call ``register(name, *, build_env, config, ...)`` once per environment."""

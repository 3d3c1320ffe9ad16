"""rlf-plugin-random: the uniform random baseline.

Names load on first use: discovery imports ``rlf_plugin_random.plugin``, and with it this package,
so importing the factory (and gymnasium) here would slow every `rlf` command.
"""

__all__ = ["RandomAgent", "build_agent", "build_learner"]


def __getattr__(name: str):
    if name in __all__:
        from . import factory

        return getattr(factory, name)
    raise AttributeError(f"module 'rlf_plugin_random' has no attribute {name!r}")

"""rlf-plugin-random: the uniform random baseline.

Names load on first use: discovery imports ``rlf_plugin_random.plugin``, and with it this package,
so importing the factory (and gymnasium) here would slow every `rlf` command.
"""

from rlf.lazy import lazy_exports

_EXPORTS = dict.fromkeys(["RandomAgent", "build_agent", "build_learner"], "factory")

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

"""The plugin platform: the hooks a plugin implements (``hookspecs``), the specs it registers and the
registry that holds them (``specs``), what is installed (``discovery``), loading with failure isolation
(``loading``), ``rlf plugins
--check`` (``check``) and the core's own plugin (``builtin``)."""

from rlf.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(["API_VERSION", "AUTO_COLLECTOR", "StrategyFamily", "strategy_name",
                     "LazyCallable", "check_builders", "AlgorithmSpec", "EnvironmentSpec", "StrategySpec",
                     "CollectorSpec", "CallbackSpec", "PluginInfo", "Registry", "EmptyConfig"], "specs"),
    **dict.fromkeys(["load_registry", "reset_registry", "registry"], "loading"),
    "ENTRY_POINT_GROUP": "discovery",
    "hookimpl": "hookspecs",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)

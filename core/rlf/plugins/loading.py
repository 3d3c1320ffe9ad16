"""Plugin discovery (entry-point group ``rlf``), failure isolation, and the registry it fills.

pluggy's own ``load_setuptools_entrypoints`` imports every plugin with no try/except, so one broken
plugin would take the whole CLI down; each entry point is loaded on its own instead.

Environment variables:
  RLF_STRICT_PLUGINS=1   any load error is fatal (also ``rlf --strict``), for CI.
  RLF_LOAD_PLUGINS=a,b   load only the named entry points; set but empty loads none.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import pluggy
from pydantic import BaseModel

from rlf.config import AlgorithmConfig, CollectorConfig, EnvConfig
from rlf.errors import PluginError
from rlf.plugins import hookspecs
from rlf.plugins.discovery import ENTRY_POINT_GROUP, requested_plugins
from rlf.plugins.specs import (
    API_VERSION,
    AUTO_COLLECTOR,
    LOCAL_LAUNCHER,
    STRATEGY_ALIASES,
    AlgorithmSpec,
    CallbackSpec,
    CollectorSpec,
    EmptyConfig,
    EnvironmentSpec,
    LauncherSpec,
    PluginInfo,
    Registry,
    StrategyFamily,
    StrategySpec,
    as_builder,
    strategy_name,
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _builtin_plugins() -> list[tuple[str, Any]]:
    from rlf.plugins import (
        builtin,  # the core's own environments, strategies and collectors: a default plugin
    )

    return [("rlf", builtin)]


def load_registry(strict: bool | None = None, extra_plugins: list[tuple[str, Any]] = ()) -> Registry:
    """Discover, load and register every plugin. ``extra_plugins`` lets tests add objects directly."""
    strict = _flag("RLF_STRICT_PLUGINS") if strict is None else strict
    requested = requested_plugins()
    manager = pluggy.PluginManager("rlf")
    manager.add_hookspecs(hookspecs)
    registry = Registry()

    candidates: list[tuple[str, Callable[[], Any], Any]] = []
    for name, module in _builtin_plugins():
        candidates.append((name, lambda module=module: module, None))
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if requested is not None and ep.name not in requested:
            continue
        candidates.append((ep.name, ep.load, ep.dist))
    for name, obj in extra_plugins:
        candidates.append((name, lambda obj=obj: obj, None))

    for name, load, dist in candidates:
        info = PluginInfo(name, getattr(dist, "name", None), getattr(dist, "version", None))
        if name == "rlf":
            from rlf.version import __version__

            info.distribution, info.version = "rlf", __version__
        registry.plugins[name] = info
        try:
            with _watch_heavy(registry, name):
                plugin = load()
            _check_api_version(name, plugin)
            manager.register(plugin, name=name)
            try:
                manager.check_pending()
            except pluggy.PluginValidationError as exc:
                unknown = [caller.name for caller in manager.get_hookcallers(plugin) or []
                           if caller.spec is None]
                manager.unregister(plugin, name=name)
                raise PluginError(_unknown_hooks(unknown, exc)) from None
            info.hooks = sorted(impl.name for impl in manager.get_hookcallers(plugin) or [])
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - isolating plugin failures, sys.exit() included, is the point
            info.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            if strict:
                raise PluginError(f"plugin {name!r} failed to load: {info.error} "
                                  "(strict mode: unset RLF_STRICT_PLUGINS or uninstall the plugin)") from None

    _collect(manager, registry, strict)
    return registry


HEAVY = ("torch", "nes_py", "gym_super_mario_bros", "cv2", "ray", "tensorflow", "jax")
"""Packages whose import takes seconds: a plugin that imports one as it loads slows every rlf command."""


@contextlib.contextmanager
def _watch_heavy(registry: Registry, plugin: str):
    """Record the ``HEAVY`` packages that a plugin's import or hook brings in (``rlf plugins --check`` warns).
    One imported already (by an earlier plugin, or before discovery) hides this plugin's use of it."""
    before = {name for name in HEAVY if name in sys.modules}
    try:
        yield
    finally:
        brought = {name for name in HEAVY if name in sys.modules} - before
        if brought:
            registry.heavy_imports.setdefault(plugin, set()).update(brought)
        if before:
            registry.heavy_unmeasured.add(plugin)


HOOKS = tuple(sorted(name for name, value in vars(hookspecs).items() if hasattr(value, "rlf_spec")))
"""The hooks this core calls."""


def _unknown_hooks(names: list[str], exc: Exception) -> str:
    """A misspelt hook is the plugin author's typo; only a name close to none of ours may be a newer rlf's."""
    typos = {name: hook for name in names if (hook := _meant_hook(name))}
    if typos:
        return ("implements " + ", ".join(f"hook {name!r}: did you mean {typos[name]!r}?" for name in typos)
                + f" (this core's hooks: {', '.join(HOOKS)}); fix the name in the plugin")
    return f"implements hooks this core does not know ({exc}); it was probably built for a newer rlf: upgrade rlf"


def _meant_hook(name: str) -> str | None:
    # the hooks share "rlf_register_", which makes any two names look alike as a whole: a typo is close in
    # the word after it (rlf_register_enviroments, _logger, _envs), or very close overall (rlf_regster_...)
    stems = {re.sub(r"^(rlf_)?(register_)?", "", hook): hook for hook in HOOKS}
    word = re.sub(r"^(rlf_)?(register_)?", "", name)
    close = (difflib.get_close_matches(name, HOOKS, n=1, cutoff=0.9)
             or [stems[s] for s in difflib.get_close_matches(word, stems, n=1, cutoff=0.75)]
             or [hook for stem, hook in stems.items()
                 if len(word.rstrip("s")) >= 3 and stem.startswith(word.rstrip("s"))])
    return close[0] if close else None


def _check_api_version(name: str, plugin: Any) -> None:
    declared = getattr(plugin, "RLF_API_VERSION", None)
    if declared is None:
        raise PluginError(f"declares no RLF_API_VERSION; this core speaks API {API_VERSION}")
    if declared != API_VERSION:
        raise PluginError(f"was built for rlf API {declared} but this core speaks API {API_VERSION}; "
                          f"install versions of rlf and {name} that match")


OBSERVATION_SPACE_NAMES = ("Box", "Discrete", "MultiBinary", "MultiDiscrete", "Dict", "Tuple")
"""The ``gymnasium.spaces`` classes the core batches, which ``observation_spaces`` may name as strings."""


def _space_classes(name: str, declared: Any) -> tuple[str | type, ...] | None:
    # names keep plugin.py light (no gymnasium import at discovery); classes are for a plugin's own Space
    if declared is None:
        return None
    items = (declared,) if isinstance(declared, str | type) else tuple(declared)

    def valid(item: Any) -> bool:
        if isinstance(item, str):
            return item in OBSERVATION_SPACE_NAMES
        import gymnasium  # a plugin that passes a class has imported it already

        return isinstance(item, type) and issubclass(item, gymnasium.spaces.Space)

    if not items or not all(valid(item) for item in items):
        raise PluginError(f"algorithm {name!r}: observation_spaces must name gymnasium.spaces classes, e.g. "
                          f"(\"Box\", \"Discrete\") (one of {', '.join(OBSERVATION_SPACE_NAMES)}) or be the classes, "
                          f"not {declared!r}")
    return items


def _presets(name: str, declared) -> dict[str, str]:
    """``{env: "package:path/in/package.toml"}``, checked by form only: `rlf list` must not open files."""
    if declared is None:
        return {}
    if isinstance(declared, dict) and all(
            isinstance(env, str) and env and isinstance(where, str) and where.count(":") == 1
            and all(where.split(":")) for env, where in declared.items()):
        return dict(declared)
    raise PluginError(f"algorithm {name!r}: presets must map environment names to files in the plugin's package, "
                      f"e.g. {{\"gym:CartPole-v1\": \"my_plugin:presets/cartpole.toml\"}}, not {declared!r}")


def _collect(manager: pluggy.PluginManager, registry: Registry, strict: bool) -> None:
    def algorithm_registrar(plugin: str):
        def register(name: str, *, build_agent, build_learner, family, config, default_env=None,
                     action_spaces=("discrete",), multi_agent=True, run_defaults=None,
                     observation_spaces=None, observation_check=None, presets=None) -> None:
            if not isinstance(family, str) or not family:
                raise PluginError(f"algorithm {name!r}: family must name a registered strategy "
                                  f"(e.g. 'on-policy'), not {family!r}")
            family = strategy_name(family)
            family = StrategyFamily(family) if family in set(StrategyFamily) else family
            if not (isinstance(config, type) and issubclass(config, AlgorithmConfig)):
                raise PluginError(f"algorithm {name!r}: config must subclass rlf.AlgorithmConfig")
            observation_spaces = _space_classes(name, observation_spaces)
            if observation_check is not None and not callable(observation_check):
                raise PluginError(f"algorithm {name!r}: observation_check must be a function of the observation "
                                  f"space (or None), not {type(observation_check).__name__}")
            presets = _presets(name, presets)
            _claim(registry.algorithms, name, plugin, "algorithm")
            registry.algorithms[name] = AlgorithmSpec(
                name, as_builder(build_agent), as_builder(build_learner), family, config, plugin, default_env,
                tuple(action_spaces), multi_agent, dict(run_defaults or {}), observation_spaces, observation_check,
                presets)
            registry.plugins[plugin].algorithms.append(name)
        return register

    def environment_registrar(plugin: str):
        def register(name: str, *, build_env, config, prefer_subprocess=False) -> None:
            if not (isinstance(config, type) and issubclass(config, EnvConfig)):
                raise PluginError(f"environment {name!r}: config must subclass rlf.EnvConfig")
            _claim(registry.environments, name, plugin, "environment")
            registry.environments[name] = EnvironmentSpec(
                name, as_builder(build_env), config, plugin, prefer_subprocess, prefix=name.endswith(":"))
            registry.plugins[plugin].environments.append(name)
        return register

    claims: dict[tuple[str, str], list[str]] = {}

    def _claim(table: dict, name: str, plugin: str, kind: str) -> None:
        # The core's own names (gym:, its strategies and collectors) stay the core's: a plugin that
        # claims one gets the error. Between plugins every claim is recorded and the name goes to
        # no one when there are several: letting the first one found win is how an impostor on the
        # path became `ppo`.
        if name in table and table[name].plugin == "rlf":
            raise PluginError(f"{kind} {name!r} is already registered by plugin 'rlf' (the core); "
                              "choose another name")
        claims.setdefault((kind, name), []).append(plugin)

    def strategy_registrar(plugin: str):
        def register(name: str, *, strategy, config=None, description: str = "") -> None:
            config = AlgorithmConfig if config is None else config
            if not (isinstance(config, type) and issubclass(config, AlgorithmConfig)):
                raise PluginError(f"strategy {name!r}: config must subclass rlf.AlgorithmConfig (algorithms of "
                                  "this family extend it), or be None")
            if not name or name in STRATEGY_ALIASES:
                raise PluginError(f"strategy name {name!r} is reserved or empty; choose another name")
            if not (isinstance(strategy, str) or callable(strategy)):
                raise PluginError(f"strategy {name!r}: strategy must be a TrainStrategy class or "
                                  "'package.module:Class'")
            _claim(registry.strategies, name, plugin, "strategy")
            registry.strategies[name] = StrategySpec(name, as_builder(strategy), config, plugin, description)
            registry.plugins[plugin].strategies.append(name)
        return register

    def collector_registrar(plugin: str):
        def register(name: str, *, build_collector, config=None, description: str = "",
                     build_actor_pool=None) -> None:
            config = CollectorConfig if config is None else config
            if not (isinstance(config, type) and issubclass(config, BaseModel)):
                raise PluginError(f"collector {name!r}: config must be a pydantic model class (e.g. a "
                                  "subclass of rlf.CollectorConfig), or None for no settings")
            if not name or name == AUTO_COLLECTOR:
                raise PluginError(f"collector name {name!r} is reserved or empty; choose another name")
            _claim(registry.collectors, name, plugin, "collector")
            registry.collectors[name] = CollectorSpec(
                name, as_builder(build_collector), config, plugin, description,
                None if build_actor_pool is None else as_builder(build_actor_pool))
            registry.plugins[plugin].collectors.append(name)
        return register

    def callback_registrar(kind: str, table: dict[str, CallbackSpec]):
        def for_plugin(plugin: str):
            def register(name: str, *, config=None, description: str = "", **builder) -> None:
                key = f"build_{kind}"
                if set(builder) != {key}:
                    raise PluginError(f"{kind} {name!r}: register it with {key}=<callable or 'module:function'>")
                config = EmptyConfig if config is None else config
                if not (isinstance(config, type) and issubclass(config, BaseModel)):
                    raise PluginError(f"{kind} {name!r}: config must be a pydantic model class, or None")
                if not name:
                    raise PluginError(f"a {kind} needs a name")
                _claim(table, name, plugin, kind)
                table[name] = CallbackSpec(name, as_builder(builder[key]), config, plugin, description)
                getattr(registry.plugins[plugin], f"{kind}s").append(name)
            return register
        return for_plugin

    def launcher_registrar(plugin: str):
        def register(name: str, *, launch, check=None, description: str = "") -> None:
            if not name or name == LOCAL_LAUNCHER:
                raise PluginError(f"launcher name {name!r} is reserved or empty; choose another name")
            for what, value in (("launch", launch), ("check", check)):
                if value is not None and not (isinstance(value, str) or callable(value)):
                    raise PluginError(f"launcher {name!r}: {what} must be a function or 'module:function'")
            _claim(registry.launchers, name, plugin, "launcher")
            registry.launchers[name] = LauncherSpec(name, as_builder(launch),
                                                    None if check is None else as_builder(check), plugin, description)
            registry.plugins[plugin].launchers.append(name)
        return register

    for hook, registrar in (("rlf_register_algorithms", algorithm_registrar),
                            ("rlf_register_environments", environment_registrar),
                            ("rlf_register_strategies", strategy_registrar),
                            ("rlf_register_collectors", collector_registrar),
                            ("rlf_register_loggers", callback_registrar("logger", registry.loggers)),
                            ("rlf_register_callbacks", callback_registrar("callback", registry.callbacks)),
                            ("rlf_register_tune_launchers", launcher_registrar)):
        for impl in getattr(manager.hook, hook).get_hookimpls():
            try:
                with _watch_heavy(registry, impl.plugin_name):
                    impl.function(register=registrar(impl.plugin_name))
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001
                info = registry.plugins[impl.plugin_name]
                info.error = info.error or f"{hook}: {type(exc).__name__}: {exc}".splitlines()[0]
                if strict:
                    raise PluginError(f"plugin {impl.plugin_name!r} failed to register: {info.error}") from None
    _drop_conflicts(registry, claims, strict)


def _drop_conflicts(registry: Registry, claims: dict[tuple[str, str], list[str]], strict: bool) -> None:
    for (kind, name), plugins in claims.items():
        if len(plugins) < 2:
            continue
        table = {"algorithm": registry.algorithms, "environment": registry.environments,
                 "strategy": registry.strategies, "collector": registry.collectors,
                 "logger": registry.loggers, "callback": registry.callbacks, "launcher": registry.launchers}[kind]
        table.pop(name, None)
        owners = []
        for plugin in plugins:
            info = registry.plugins[plugin]
            getattr(info, "strategies" if kind == "strategy" else f"{kind}s").remove(name)
            owners.append(f"{info.distribution or plugin} {info.version or ''}".strip() + f" (entry point {plugin!r})")
        message = (f"{kind} {name!r} is registered by {len(plugins)} plugins: {', '.join(owners)}; neither is used. "
                   "Uninstall all but one (pip uninstall DIST)")
        registry.conflicts[kind, name] = message
        for plugin in plugins:
            info = registry.plugins[plugin]
            info.error = info.error or message
        if strict:
            raise PluginError(message)


_cached: Registry | None = None


def registry() -> Registry:
    """The process-wide registry, loaded on first use."""
    global _cached
    if _cached is None:
        _cached = load_registry()
    return _cached


def reset_registry() -> None:
    global _cached
    _cached = None

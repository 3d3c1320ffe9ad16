"""Plugin discovery (entry-point group ``rlf``), failure isolation and the registry they fill.

pluggy's own ``load_setuptools_entrypoints`` imports every plugin with no try/except, so one broken
plugin would take the whole CLI down; we load each entry point on its own instead.

Environment variables:
  RLF_STRICT_PLUGINS=1   any load error is fatal (also ``rlf --strict``), for CI.
  RLF_LOAD_PLUGINS=a,b   load only the named entry points; set but empty loads none.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from importlib.metadata import entry_points
from typing import Any

import pluggy
from pydantic import BaseModel

from . import hookspecs
from .config import AlgorithmConfig, CollectorConfig, EnvConfig, StrictModel
from .errors import PluginError, UnknownNameError

API_VERSION = 1
"""The core API a plugin declares with a module attribute ``RLF_API_VERSION``; bumped on breaking changes."""

ENTRY_POINT_GROUP = "rlf"


class StrategyFamily(StrEnum):
    """The core's two strategy families, by their names before strategies were plugins.

    Kept so existing plugins keep working: ``family=StrategyFamily.ON_POLICY`` names the registered
    strategy ``on-policy`` (see ``STRATEGY_ALIASES``). New code names a strategy by its registered name.
    """

    ON_POLICY = "on_policy"
    OFF_POLICY = "off_policy"


STRATEGY_ALIASES = {StrategyFamily.ON_POLICY.value: "on-policy", StrategyFamily.OFF_POLICY.value: "off-policy"}


def strategy_name(family: str) -> str:
    """The registered strategy an algorithm's ``family`` names (the old enum values are aliases)."""
    return STRATEGY_ALIASES.get(str(family), str(family))


class LazyCallable:
    """A builder named ``"package.module:function"``, imported on first call.

    Registering builders by name keeps discovery fast: `rlf list` never imports torch or an emulator.
    Picklable, so env factories built from it can cross into subprocess workers.
    """

    def __init__(self, reference: str):
        module, colon, attribute = reference.partition(":")
        if not colon or not module or not attribute:
            raise PluginError(f"builder reference {reference!r} must look like 'package.module:function'")
        self.reference = reference
        self._target = None

    @property
    def target(self) -> Callable:
        if self._target is None:
            self._target = _import_builder(self.reference)
        return self._target

    def __call__(self, *args, **kwargs):
        return self.target(*args, **kwargs)

    def __getstate__(self):
        return {"reference": self.reference, "_target": None}

    def __repr__(self) -> str:
        return f"LazyCallable({self.reference!r})"


def _import_builder(reference: str) -> Callable:
    """The callable a ``"module:function"`` string names, or a PluginError naming the string.

    Anything the import raises, SystemExit included, is the plugin's failure, not the CLI's exit."""
    from importlib import import_module

    module, _, attribute = reference.partition(":")
    try:
        target = import_module(module)
        for part in attribute.split("."):
            target = getattr(target, part)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin must not be able to end the process
        detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise PluginError(f"builder {reference!r} cannot be imported ({detail}); reinstall or fix the plugin "
                          "that registers it (`rlf plugins --check` lists every broken builder)") from None
    if not callable(target):
        raise PluginError(f"builder {reference!r} is a {type(target).__name__}, not a function; fix the plugin")
    return target


def check_builders(*builders: Callable) -> None:
    """Import every lazily named builder now, so a typo fails before anything is written."""
    for builder in builders:
        if isinstance(builder, LazyCallable):
            builder.target  # noqa: B018 - importing is the check


def _builder(value: Callable | str) -> Callable:
    return LazyCallable(value) if isinstance(value, str) else value


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str
    build_agent: Callable
    build_learner: Callable
    family: str
    """The strategy family it needs, as the plugin declared it (see ``strategy_name``)."""
    config: type[AlgorithmConfig]
    plugin: str
    default_env: str | None = None
    action_spaces: tuple[str, ...] = ("discrete",)
    """Kinds of action space supported: "discrete" and/or "continuous"."""
    multi_agent: bool = True
    run_defaults: dict[str, Any] = field(default_factory=dict)
    """Run-config defaults this algorithm prefers, e.g. ``{"num_envs": 8}``; below the user's settings."""
    observation_spaces: tuple[str | type, ...] | None = None
    """The ``gymnasium.spaces`` classes it reads, by name (``("Box", "Discrete")``) or as classes; None: any
    the core batches."""
    observation_check: Callable[[Any], str | None] | None = None
    """``observation_check(space)``: None when it can read ``space``, else what it needs, one phrase
    ("images of at least 36x36"), which the refusal quotes."""


@dataclass(frozen=True)
class EnvironmentSpec:
    name: str
    build_env: Callable
    config: type[EnvConfig]
    plugin: str
    prefer_subprocess: bool = False
    """Expensive envs (emulators) run one per subprocess when ``vector = "auto"``."""
    prefix: bool = False
    """Registered as ``name:`` and matching ``name:<anything>`` (e.g. gym:CartPole-v1)."""


@dataclass(frozen=True)
class StrategySpec:
    name: str
    strategy: Callable
    """The TrainStrategy class (possibly lazy): ``strategy(algorithm, env_name, env_factory, context, collector)``."""
    config: type[AlgorithmConfig]
    """Settings the strategy reads; the config of every algorithm of this family subclasses it."""
    plugin: str
    description: str = ""


@dataclass(frozen=True)
class CollectorSpec:
    name: str
    build_collector: Callable
    """``build_collector(env_name, factory, num_envs, config) -> VectorEnv``."""
    config: type[BaseModel]
    plugin: str
    description: str = ""
    build_actor_pool: Callable | None = None
    """``build_actor_pool(job, config) -> ActorPool``: hosts the off-policy actors (None: local processes)."""


@dataclass(frozen=True)
class CallbackSpec:
    """A logger or a callback a plugin registered: ``build(run_dir, run, config) -> rlf.Callback``."""

    name: str
    build: Callable
    config: type[BaseModel]
    plugin: str
    description: str = ""


AUTO_COLLECTOR = "auto"
"""``run.vector = "auto"``: the environment's preference between the built-in ``sync`` and ``async``."""


@dataclass
class PluginInfo:
    name: str
    distribution: str | None
    version: str | None
    hooks: list[str] = field(default_factory=list)
    error: str | None = None
    algorithms: list[str] = field(default_factory=list)
    environments: list[str] = field(default_factory=list)
    strategies: list[str] = field(default_factory=list)
    collectors: list[str] = field(default_factory=list)
    loggers: list[str] = field(default_factory=list)
    callbacks: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Registry:
    """The installed algorithms, environments, strategies and collectors, and what happened when loading
    each plugin."""

    def __init__(self) -> None:
        self.algorithms: dict[str, AlgorithmSpec] = {}
        self.environments: dict[str, EnvironmentSpec] = {}
        self.strategies: dict[str, StrategySpec] = {}
        self.collectors: dict[str, CollectorSpec] = {}
        self.loggers: dict[str, CallbackSpec] = {}
        self.callbacks: dict[str, CallbackSpec] = {}
        self.plugins: dict[str, PluginInfo] = {}
        self.conflicts: dict[tuple[str, str], str] = {}
        """(kind, name) -> the error for a name that several plugins register; none of them gets it."""

    @property
    def errors(self) -> dict[str, str]:
        return {name: info.error for name, info in self.plugins.items() if info.error}

    def algorithm(self, name: str) -> AlgorithmSpec:
        if ("algorithm", name) in self.conflicts:
            raise PluginError(self.conflicts["algorithm", name])
        if name in self.algorithms:
            return self.algorithms[name]
        raise UnknownNameError(_unknown("algorithm", name, sorted(self.algorithms), self.errors))

    def environment(self, name: str) -> EnvironmentSpec:
        for key in (name, f"{name.partition(':')[0]}:"):
            if ("environment", key) in self.conflicts:
                raise PluginError(self.conflicts["environment", key])
        if name in self.environments:
            return self.environments[name]
        head, colon, _ = name.partition(":")
        if colon and f"{head}:" in self.environments:
            return self.environments[f"{head}:"]
        known = sorted(n + ("<id>" if self.environments[n].prefix else "") for n in self.environments)
        raise UnknownNameError(_unknown("environment", name, known, self.errors))

    def strategy(self, family: str, algorithm: AlgorithmSpec | None = None) -> StrategySpec:
        """The strategy family ``family`` names; with ``algorithm``, also check its config fits."""
        name = strategy_name(family)
        if name not in self.strategies:
            needed = f"algorithm {algorithm.name!r} needs " if algorithm else ""
            raise UnknownNameError(needed + _unknown("strategy", name, sorted(self.strategies), self.errors))
        spec = self.strategies[name]
        if algorithm is not None and not issubclass(algorithm.config, spec.config):
            raise PluginError(f"algorithm {algorithm.name!r} (plugin {algorithm.plugin!r}) runs on strategy {name!r}, "
                              f"whose settings are {spec.config.__name__}, but its config {algorithm.config.__name__} "
                              f"does not subclass it; fix the plugin's config class")
        return spec

    def collector(self, name: str, environment: EnvironmentSpec | None = None) -> CollectorSpec:
        """The collector ``run.vector`` names; ``auto`` is the environment's preference (sync or async)."""
        if name == AUTO_COLLECTOR:
            name = "async" if environment is not None and environment.prefer_subprocess else "sync"
        if name in self.collectors:
            return self.collectors[name]
        message = _unknown("collector", name, sorted(self.collectors), self.errors)
        raise UnknownNameError(f"run.vector: {message} (or {AUTO_COLLECTOR!r})")

    def logger(self, name: str) -> CallbackSpec:
        if name in self.loggers:
            return self.loggers[name]
        raise UnknownNameError("run.loggers: " + _unknown("logger", name, sorted(self.loggers), self.errors))

    def callback(self, name: str) -> CallbackSpec:
        if name in self.callbacks:
            return self.callbacks[name]
        raise UnknownNameError("run.callbacks: " + _unknown("callback", name, sorted(self.callbacks), self.errors))

    def plugin_versions(self) -> dict[str, str | None]:
        return {name: info.version for name, info in self.plugins.items() if not info.error}


def _unknown(kind: str, name: str, known: list[str], errors: dict[str, str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    installed = ", ".join(known) or "none"
    provider = f"rlf-plugin-{name.split(':')[0]}"
    broken = f" (plugins that failed to load: {', '.join(sorted(errors))}; see `rlf plugins`)" if errors else ""
    return (f"unknown {kind} {name!r}: {hint}installed: {installed}. "
            f"If {provider} provides it, `pip install {provider}`{broken}")


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _requested_plugins() -> set[str] | None:
    raw = os.environ.get("RLF_LOAD_PLUGINS")
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _builtin_plugins() -> list[tuple[str, Any]]:
    from . import builtin  # the core's own environments, strategies and collectors: a default plugin

    return [("rlf", builtin)]


def load_registry(strict: bool | None = None, extra_plugins: list[tuple[str, Any]] = ()) -> Registry:
    """Discover, load and register every plugin. ``extra_plugins`` lets tests add objects directly."""
    strict = _flag("RLF_STRICT_PLUGINS") if strict is None else strict
    requested = _requested_plugins()
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
            from . import __version__

            info.distribution, info.version = "rlf", __version__
        registry.plugins[name] = info
        try:
            plugin = load()
            _check_api_version(name, plugin)
            manager.register(plugin, name=name)
            try:
                manager.check_pending()
            except pluggy.PluginValidationError as exc:
                manager.unregister(plugin, name=name)
                raise PluginError(f"implements hooks this core does not know ({exc}); "
                                  "it was probably built for a newer rlf: upgrade rlf") from None
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


def _check_api_version(name: str, plugin: Any) -> None:
    declared = getattr(plugin, "RLF_API_VERSION", None)
    if declared is None:
        raise PluginError(f"declares no RLF_API_VERSION; this core speaks API {API_VERSION}")
    if declared != API_VERSION:
        raise PluginError(f"was built for rlf API {declared} but this core speaks API {API_VERSION}; "
                          f"install versions of rlf and {name} that match")


OBSERVATION_SPACE_NAMES = ("Box", "Discrete", "MultiBinary", "MultiDiscrete")
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


def _collect(manager: pluggy.PluginManager, registry: Registry, strict: bool) -> None:
    def algorithm_registrar(plugin: str):
        def register(name: str, *, build_agent, build_learner, family, config, default_env=None,
                     action_spaces=("discrete",), multi_agent=True, run_defaults=None,
                     observation_spaces=None, observation_check=None) -> None:
            if not isinstance(family, str) or not family:
                raise PluginError(f"algorithm {name!r}: family must name a registered strategy "
                                  f"(e.g. 'on-policy'), not {family!r}")
            family = StrategyFamily(family) if family in set(StrategyFamily) else family
            if not (isinstance(config, type) and issubclass(config, AlgorithmConfig)):
                raise PluginError(f"algorithm {name!r}: config must subclass rlf.AlgorithmConfig")
            observation_spaces = _space_classes(name, observation_spaces)
            if observation_check is not None and not callable(observation_check):
                raise PluginError(f"algorithm {name!r}: observation_check must be a function of the observation "
                                  f"space (or None), not {type(observation_check).__name__}")
            _claim(registry.algorithms, name, plugin, "algorithm")
            registry.algorithms[name] = AlgorithmSpec(
                name, _builder(build_agent), _builder(build_learner), family, config, plugin, default_env,
                tuple(action_spaces), multi_agent, dict(run_defaults or {}), observation_spaces, observation_check)
            registry.plugins[plugin].algorithms.append(name)
        return register

    def environment_registrar(plugin: str):
        def register(name: str, *, build_env, config, prefer_subprocess=False) -> None:
            if not (isinstance(config, type) and issubclass(config, EnvConfig)):
                raise PluginError(f"environment {name!r}: config must subclass rlf.EnvConfig")
            _claim(registry.environments, name, plugin, "environment")
            registry.environments[name] = EnvironmentSpec(
                name, _builder(build_env), config, plugin, prefer_subprocess, prefix=name.endswith(":"))
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
            registry.strategies[name] = StrategySpec(name, _builder(strategy), config, plugin, description)
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
                name, _builder(build_collector), config, plugin, description,
                None if build_actor_pool is None else _builder(build_actor_pool))
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
                table[name] = CallbackSpec(name, _builder(builder[key]), config, plugin, description)
                getattr(registry.plugins[plugin], f"{kind}s").append(name)
            return register
        return for_plugin

    for hook, registrar in (("rlf_register_algorithms", algorithm_registrar),
                            ("rlf_register_environments", environment_registrar),
                            ("rlf_register_strategies", strategy_registrar),
                            ("rlf_register_collectors", collector_registrar),
                            ("rlf_register_loggers", callback_registrar("logger", registry.loggers)),
                            ("rlf_register_callbacks", callback_registrar("callback", registry.callbacks))):
        for impl in getattr(manager.hook, hook).get_hookimpls():
            try:
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
                 "logger": registry.loggers, "callback": registry.callbacks}[kind]
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


class EmptyConfig(StrictModel):
    """No settings."""


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

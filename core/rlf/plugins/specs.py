"""What plugins register: one spec per algorithm, environment, strategy, collector, logger and
callback, the ``"module:function"`` builders they name (imported on first use), and the ``Registry``
that holds them and answers unknown names with the installed ones.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from rlf.config import AlgorithmConfig, EnvConfig, StrictModel
from rlf.errors import PluginError, UnknownNameError
from rlf.plugins.discovery import ENTRY_POINT_GROUP, requested_plugins, unseen_plugins

API_VERSION = 1
"""The core API a plugin declares with a module attribute ``RLF_API_VERSION``; bumped on breaking changes."""



class StrategyFamily(StrEnum):
    """The core's two strategy families by their registered names: ``family=StrategyFamily.OFF_POLICY``
    is ``family="off-policy"``. The underscore spellings these once had (``"off_policy"``) still name
    the same strategies (``STRATEGY_ALIASES``), so plugins written against them keep working."""

    ON_POLICY = "on-policy"
    OFF_POLICY = "off-policy"


STRATEGY_ALIASES = {"on_policy": StrategyFamily.ON_POLICY.value, "off_policy": StrategyFamily.OFF_POLICY.value}


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


def as_builder(value: Callable | str) -> Callable:
    """A registered builder: a callable as it is, a ``"module:attr"`` string imported when first called."""
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
    presets: dict[str, str] = field(default_factory=dict)
    """Tuned settings per environment: ``{"gym:CartPole-v1": "package:presets/cartpole.toml"}``, a TOML
    file inside the plugin's package that ``rlf train ALGO --env ENV`` layers under the user's settings."""


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


@dataclass(frozen=True)
class LauncherSpec:
    """Where ``rlf tune --launcher NAME`` runs its worker loops: ``launch(job)``, after ``check(job)``."""

    name: str
    launch: Callable
    check: Callable | None
    plugin: str
    description: str = ""


LOCAL_LAUNCHER = "processes"
"""``rlf tune``'s own launcher (worker processes on this machine); no plugin may register the name."""


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
    launchers: list[str] = field(default_factory=list)

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
        self.launchers: dict[str, LauncherSpec] = {}
        """``rlf tune --launcher`` names (the core's own ``processes`` is not among them)."""
        self.plugins: dict[str, PluginInfo] = {}
        self.conflicts: dict[tuple[str, str], str] = {}
        """(kind, name) -> the error for a name that several plugins register; none of them gets it."""
        self.heavy_imports: dict[str, set[str]] = {}
        """Plugin -> the heavy packages (``loading.HEAVY``) its import or registration hooks imported."""
        self.heavy_unmeasured: set[str] = set()
        """Plugins that loaded while a heavy package was imported already: their own use of it is unseen."""

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

    def launcher(self, name: str) -> LauncherSpec | None:
        """The launcher ``rlf tune --launcher`` names; None for the core's own (``processes``)."""
        if name == LOCAL_LAUNCHER:
            return None
        if ("launcher", name) in self.conflicts:
            raise PluginError(self.conflicts["launcher", name])
        if name in self.launchers:
            return self.launchers[name]
        installed = ", ".join([LOCAL_LAUNCHER, *sorted(self.launchers)])
        close = difflib.get_close_matches(name, [LOCAL_LAUNCHER, *self.launchers], n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UnknownNameError(f"--launcher: unknown launcher {name!r}: {hint}installed: {installed}"
                               + ("" if "ray" in self.launchers else f"; {_ray_launcher_advice()}"))

    def plugin_versions(self) -> dict[str, str | None]:
        return {name: info.version for name, info in self.plugins.items() if not info.error}


def _unknown(kind: str, name: str, known: list[str], errors: dict[str, str]) -> str:
    from importlib.metadata import PackageNotFoundError, distribution

    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    installed = ", ".join(known) or "none"
    provider = f"rlf-plugin-{name.split(':')[0]}"
    broken = f" (plugins that failed to load: {', '.join(sorted(errors))}; see `rlf plugins`)" if errors else ""
    try:
        unseen = unseen_plugins()
    except Exception:  # noqa: BLE001 - a broken installed distribution must not hide the error being reported
        unseen = []
    blind = [u for u in unseen if _canonical(u.distribution) == _canonical(provider)]
    if blind:  # installed, and `pip install` would change nothing
        advice = blind[0].line()
    else:
        try:
            distribution(provider)
        except (PackageNotFoundError, ValueError):
            advice = f"If {provider} provides it, `pip install {provider}`"
        else:
            advice = _installed_advice(provider, kind, name)
    others = [f"{u.distribution} {u.version or ''}".rstrip() + f" ({u.why})" for u in unseen if u not in blind]
    more = (f"; also installed but not seen by rlf: {', '.join(others[:3])}"
            + (f" and {len(others) - 3} more" if len(others) > 3 else "") + " (see `rlf plugins`)")
    return f"unknown {kind} {name!r}: {hint}installed: {installed}. {advice}{broken}" + (more if others else "")


def _ray_launcher_advice() -> str:
    """Where the ``ray`` tune launcher comes from, when this registry lacks it."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution("rlf-plugin-ray")
    except (PackageNotFoundError, ValueError):
        return "the ray launcher (a Ray cluster) comes with `pip install rlf-plugin-ray`"
    return _installed_advice("rlf-plugin-ray", "launcher", "ray")


def _installed_advice(provider: str, kind: str, name: str) -> str:
    import os
    from importlib.metadata import distribution

    requested = requested_plugins()
    ours = [ep.name for ep in distribution(provider).entry_points if ep.group == ENTRY_POINT_GROUP]
    left_out = [ep for ep in ours if requested is not None and ep not in requested]
    if left_out:  # the usual reason in test envs and containers that load a subset on purpose
        return (f"{provider} is installed but RLF_LOAD_PLUGINS={os.environ.get('RLF_LOAD_PLUGINS', '')!r} "
                f"leaves it out: add {left_out[0]!r} to it or unset it")
    return f"{provider} is installed but registers no {kind} {name!r}"


def _canonical(name: str) -> str:
    return name.replace("_", "-").replace(".", "-").lower()


class EmptyConfig(StrictModel):
    """No settings."""

"""From names and settings to one validated run configuration (``Resolved``): the registry's plugins,
config files, ``--set`` overrides, and whether the algorithm fits the environment's spaces.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium
from pydantic import BaseModel

from rlf import observations
from rlf.config import (
    SECTIONS,
    AlgorithmConfig,
    EnvConfig,
    RunConfig,
    load_toml,
    merge,
    parse_overrides,
    validate,
)
from rlf.envs.base import action_kinds
from rlf.errors import ConfigError, IncompatibleError, PluginError, PluginRunError, guarded
from rlf.plugins.loading import registry as default_registry
from rlf.plugins.specs import (
    AlgorithmSpec,
    CollectorSpec,
    EnvironmentSpec,
    Registry,
    StrategySpec,
)


@dataclass
class Resolved:
    run: RunConfig
    algo: AlgorithmConfig
    env: EnvConfig
    algorithm: AlgorithmSpec
    environment: EnvironmentSpec
    collector: BaseModel
    """The ``[collector]`` settings, validated against the selected collector's model."""
    collector_spec: CollectorSpec
    """The collector ``run.vector`` selected (``auto`` resolved)."""
    strategy: StrategySpec
    """The strategy family the algorithm runs on."""
    loggers: dict[str, BaseModel] = field(default_factory=dict)
    """``run.loggers`` in order, each with its validated ``[logger.<name>]`` settings."""
    callbacks: dict[str, BaseModel] = field(default_factory=dict)
    """``run.callbacks`` in order, each with its validated ``[callback.<name>]`` settings."""
    preset: str | None = None
    """The plugin's preset layered under the user's settings (``package/path.toml``), if one was."""

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run.model_dump(mode="json"), "algo": self.algo.model_dump(mode="json"),
                "env": self.env.model_dump(mode="json"), "collector": self.collector.model_dump(mode="json"),
                "logger": {name: value.model_dump(mode="json") for name, value in self.loggers.items()},
                "callback": {name: value.model_dump(mode="json") for name, value in self.callbacks.items()}}


def resolve(algorithm: str, env: str | None = None, *, config_file: Path | None = None,
            overrides: Iterable[str] = (), config: Mapping[str, Mapping[str, Any]] | None = None,
            registry: Registry | None = None, preset: bool = False) -> Resolved:
    """Defaults < the algorithm's run defaults < its preset for the env < ``config`` dict < TOML file <
    ``--set`` overrides.

    ``preset=True`` (what ``rlf train`` does unless told ``--no-preset``) layers the algorithm plugin's
    tuned settings for the chosen environment, if it ships some, as rl-zoo picks per-env hyperparameters;
    a config file replaces the preset (the file is the user's own full recipe)."""
    registry = registry or default_registry()
    if not isinstance(algorithm, str) or not algorithm:
        raise ConfigError(f"algorithm must be a name (see `rlf list`), not {algorithm!r}")
    spec = registry.algorithm(algorithm)
    strategy = registry.strategy(spec.family, spec)
    user_layers = (config or {}, load_toml(config_file) if config_file else {}, parse_overrides(overrides))
    layered = _layer({"run": dict(spec.run_defaults)}, user_layers)
    _check_chosen_names(algorithm, layered["run"])
    if env and layered["run"].get("env") not in (None, env):
        raise ConfigError(f"--env {env} conflicts with run.env={layered['run']['env']!r} from the config; "
                          "keep one of them")
    env_name = env or layered["run"].get("env") or spec.default_env
    if not env_name:
        raise ConfigError(f"algorithm {algorithm!r} has no default environment; pass --env ENV (see `rlf list`)")
    environment = registry.environment(env_name)

    def validated(layered: dict[str, Any], preset_label: str | None) -> Resolved:
        layered["run"]["algorithm"], layered["run"]["env"] = algorithm, env_name
        if environment.prefix:
            layered["env"].setdefault("id", env_name.split(":", 1)[1])
        run = validate(RunConfig, layered["run"], "run")
        collector = registry.collector(run.vector, environment)
        _check_collector_keys(collector, layered["collector"], registry)
        algo = validate(spec.config, layered["algo"], "algo")
        conflict = guarded(spec.plugin, "config.check_run", lambda: algo.check_run(run))
        if conflict:
            raise ConfigError(str(conflict))
        return Resolved(run, algo,
                        validate(environment.config, layered["env"], "env"), spec, environment,
                        validate(collector.config, layered["collector"], "collector"), collector, strategy,
                        _named_settings("logger", run.loggers, registry.logger, layered["logger"]),
                        _named_settings("callback", run.callbacks, registry.callback, layered["callback"]),
                        preset_label)

    chosen = load_preset(spec, env_name) if preset and config_file is None else None
    if chosen is None:
        return validated(layered, None)
    label, tables = chosen
    try:
        return validated(_layer(merge({"run": dict(spec.run_defaults)}, tables), user_layers), label)
    except ConfigError as exc:
        validated(layered, None)  # the user's own settings at fault: their error, as without a preset
        raise PluginError(f"{spec.name}'s preset for {env_name} ({label}) does not validate: {exc}; reinstall "
                          f"plugin {spec.plugin!r} or train without it (--no-preset)") from None


def _layer(base: Mapping[str, Any], layers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    layered: dict[str, Any] = merge({section: {} for section in SECTIONS}, base)
    for layer in layers:
        unknown = set(layer) - set(SECTIONS)
        if unknown:
            raise ConfigError(f"unknown config section(s) {sorted(unknown)}; use {', '.join(SECTIONS)}")
        layered = merge(layered, layer)
    return layered


def load_preset(spec: AlgorithmSpec, env_name: str) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """The plugin's preset for ``env_name`` as ``(package/path, config tables)``, None if it ships none.

    A preset that is missing or names another algorithm or env is the plugin's fault, not the user's:
    a ``PluginError`` that says how to train without it."""
    where = spec.presets.get(env_name)
    if where is None:
        return None
    package, relative = where.split(":")
    label = f"{package}/{relative}"
    escape = f"reinstall plugin {spec.plugin!r} or train without it (--no-preset)"
    try:
        resource = importlib.resources.files(package).joinpath(relative)
        with importlib.resources.as_file(resource) as path:
            if not path.is_file():
                raise FileNotFoundError(path)
            tables = load_toml(path)
    except (ImportError, FileNotFoundError, NotADirectoryError):
        raise PluginError(f"{spec.name}'s preset for {env_name} ({label}) is not installed; {escape}") from None
    except ConfigError as exc:
        raise PluginError(f"{spec.name}'s preset for {env_name} is not a valid config: {exc}; {escape}") from None
    named = {"env": tables["run"].get("env", env_name), "algorithm": tables["run"].get("algorithm", spec.name)}
    if named != {"env": env_name, "algorithm": spec.name}:
        raise PluginError(f"{spec.name}'s preset for {env_name} ({label}) is written for {named['algorithm']} on "
                          f"{named['env']}; {escape}")
    return label, tables


def _check_collector_keys(chosen, settings: Mapping[str, Any], registry: Registry) -> None:
    """A ``collector.X`` that only another collector reads: name the collector that would read it."""
    for key in settings:
        if key in chosen.config.model_fields:
            continue
        owners = sorted(name for name, spec in registry.collectors.items()
                        if name != chosen.name and key in spec.config.model_fields)
        if owners:
            choices = " or ".join(f"vector={name}" for name in owners)
            raise ConfigError(f"collector.{key} is a setting of the {', '.join(map(repr, owners))} collector, but "
                              f"this run's collector is {chosen.name!r} (run.vector); set {choices} to use it, "
                              "or drop the setting")


def _named_settings(kind: str, names: list[str], lookup, settings: Mapping[str, Any]) -> dict[str, BaseModel]:
    """Each selected logger's (or callback's) validated settings; settings for one not selected are an error."""
    stray = sorted(set(settings) - set(names))
    if stray:
        raise ConfigError(f"[{kind}.{stray[0]}] configures a {kind} that run.{kind}s does not select "
                          f"({names}); add it to run.{kind}s or remove the settings")
    resolved = {}
    for name in names:
        values = settings.get(name, {})
        if not isinstance(values, Mapping):
            raise ConfigError(f"{kind}.{name} must be a table of settings, e.g. --set {kind}.{name}.key=value")
        resolved[name] = validate(lookup(name).config, values, f"{kind}.{name}")
    return resolved


def _check_chosen_names(algorithm: str, run: Mapping[str, Any]) -> None:
    """run.algorithm is chosen on the command line; a different one in a file or --set would be ignored."""
    chosen = run.get("algorithm", algorithm)
    if chosen != algorithm:
        raise ConfigError(f"run.algorithm={chosen!r} conflicts with the algorithm being trained ({algorithm!r}); "
                          "the algorithm is chosen on the command line (rlf train ALGO): drop run.algorithm")
    env = run.get("env")
    if env is not None and (not isinstance(env, str) or not env.strip()):
        raise ConfigError(f"run.env must be an environment name such as \"gym:CartPole-v1\" (see `rlf list`), "
                          f"not {env!r}; pass it with --env")


def _observation_need(spec: AlgorithmSpec, space: gymnasium.Space) -> str | None:
    """What the algorithm declared it needs and ``space`` lacks, as a phrase; None when it can read it."""
    if spec.observation_spaces is not None:
        accepted = tuple(getattr(gymnasium.spaces, c) if isinstance(c, str) else c for c in spec.observation_spaces)
        if not isinstance(space, accepted):
            return "/".join(cls.__name__ for cls in accepted) + " observations"
    elif observations.is_structured(space):
        # an algorithm written before Dict/Tuple batches existed indexes its observations as one array
        return ("array observations (it does not declare observation_spaces with "
                f"\"{type(space).__name__}\")")
    if spec.observation_check is None:
        return None
    need = guarded(spec.plugin, f"algorithm {spec.name!r} (its observation_check)", spec.observation_check, space)
    if need is not None and not isinstance(need, str):
        raise PluginRunError(f"plugin {spec.plugin!r} failed in algorithm {spec.name!r} (its observation_check): "
                             f"it returned {type(need).__name__}, not None or a phrase saying what it needs; "
                             "fix the plugin")
    return need or None


def check_compatible(spec: AlgorithmSpec, env_spec) -> None:
    """Refuses, before anything is written, a pair the algorithm's registration rules out (one line)."""
    for agent, space in env_spec.observation_spaces.items():
        why = observations.unsupported(space)
        if why is None and env_spec.multi_agent and observations.is_structured(space):
            why = f"{type(space).__name__} observations are supported for single-agent (Gymnasium) envs only"
        if why is not None:
            raise IncompatibleError(
                f"{env_spec.name} gives agent {agent!r} {space}: {why}; wrap the env to flatten them "
                "(gymnasium.wrappers.FlattenObservation) in an environment plugin, or choose another environment")
        need = _observation_need(spec, space)
        if need:
            raise IncompatibleError(
                f"algorithm {spec.name!r} reads {need}, but {env_spec.name} gives agent {agent!r} {space}; "
                "choose an environment with such observations (or wrap this one in an environment plugin), "
                "or another algorithm")
    for agent, kind in action_kinds(env_spec).items():
        if kind not in spec.action_spaces:
            space = env_spec.action_spaces[agent]
            raise IncompatibleError(
                f"algorithm {spec.name!r} supports {'/'.join(spec.action_spaces)} action spaces, but "
                f"{env_spec.name} gives agent {agent!r} {space}; choose an environment with "
                f"{spec.action_spaces[0]} actions or another algorithm")
    if env_spec.multi_agent and not spec.multi_agent:
        raise IncompatibleError(f"algorithm {spec.name!r} is single-agent only and {env_spec.name} is multi-agent; "
                                "choose a single-agent environment")

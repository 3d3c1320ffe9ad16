"""Validated configuration: the run, the two strategy families, and the base models plugins extend.

Layering, lowest first: model defaults < the algorithm's ``run_defaults`` < its preset for the env (``rlf train``;
``rlf.resolution.resolve(preset=True)``) < a TOML file < ``--set``
overrides. Every model forbids unknown keys, so a typo is an error, not a silently ignored setting.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from rlf.errors import ConfigError

SECTIONS = ("run", "algo", "env", "collector", "logger", "callback")


def _refusal(wanted: str, value: Any, types: tuple[type, ...]) -> PydanticCustomError:
    """``value`` is not ``wanted``: say what it is; a string that unquoted would fit says so (``hint``,
    which `format_validation_error` puts after the value)."""
    if isinstance(value, bool):
        kind = "true/false"
    elif isinstance(value, str):
        kind = "a string"
    else:
        kind = {int: "an integer", float: "a number", bytes: "bytes"}.get(type(value), type(value).__name__)
    hint = ""
    if isinstance(value, str):
        try:
            unquoted = parse_value(value.strip())
        except RecursionError:  # a string of a thousand brackets, say
            unquoted = value
        if isinstance(unquoted, types) and (bool in types or not isinstance(unquoted, bool)):
            hint = f"; write it without quotes ({value.strip()}, not \"{value.strip()}\")"
    # "{text}": the text as is, braces included
    return PydanticCustomError("rlf_type", "{text}", {"text": f"must be {wanted}, not {kind}", "hint": hint})


def _integer(value: Any) -> Any:
    if isinstance(value, str | bytes | bool):
        raise _refusal("an integer", value, (int,))
    return value


def _number(value: Any) -> Any:
    if isinstance(value, str | bytes | bool):
        raise _refusal("a number", value, (int, float))
    return value


def _boolean(value: Any) -> Any:
    if not isinstance(value, bool):
        raise _refusal("true or false", value, (bool,))
    return value


_GUARDS = {"int": _integer, "float": _number, "bool": _boolean}
_GUARDED = set(_GUARDS.values())


def _tighten(schema: Any) -> Any:
    """pydantic's lax mode reads "64" as 64, true as 1 and "yes" or 1 as true: a quoted number in a
    TOML file or a `--set` would pass unnoticed, and `steps=true` would train one step. Its strict mode
    would also refuse a list for a tuple and a string for a Path, which TOML cannot give otherwise. So
    every int, float and bool schema in the model (inside lists, unions and nested tables too) gets a
    guard in front that refuses exactly those: an int for a float, a whole float for an int, a list for
    a tuple stay accepted."""
    if isinstance(schema, list):
        return [_tighten(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if not isinstance(kind, str):  # not a schema: a model's fields by name, say (one may be called "type")
        return {key: _tighten(value) for key, value in schema.items()}
    if kind == "function-before" and schema["function"].get("function") in _GUARDED:
        return schema  # a nested model's fields, guarded by its own schema already
    # serialization and metadata hold no validators; a serializer may be written {"type": "int"} too
    tightened = {key: value if key in ("serialization", "metadata") else _tighten(value)
                 for key, value in schema.items()}
    guard = _GUARDS.get(kind)
    return core_schema.no_info_before_validator_function(guard, tightened) if guard else tightened


class StrictModel(BaseModel):
    """A config model that rejects unknown keys and re-validates on assignment, and takes no string for a
    number or a boolean and nothing but true/false for a boolean (see `_tighten`)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return _tighten(handler(source))


class AlgorithmConfig(StrictModel):
    """Base of every algorithm's config."""

    def check_run(self, run: Any) -> str | None:
        """Settings that only conflict with the run's (envs that do not split among actors, say): one line
        saying what is wrong and how to fix it, or None. Called as the settings resolve, before any run
        directory exists; a plugin's config overrides it (a field validator cannot see ``[run]``)."""
        return None


class EnvConfig(StrictModel):
    """Base of every environment's config."""


class CollectorConfig(StrictModel):
    """Settings of a collector (``run.vector``); the built-in ``sync`` has none."""


class AsyncCollectorConfig(CollectorConfig):
    """Settings of the built-in ``async`` collector (one subprocess per env copy)."""

    worker_nice: int = Field(
        0, ge=0, le=19,
        description="CPU niceness of the env worker processes above the training process's own (0 = the same). "
                    "On Mario, 0 measured fastest on a machine of its own and as fast as 2 beside other programs; "
                    "19 lets any other program starve the workers (benchmarks/worker_nice.py). Raise it to leave "
                    "the cores to other work.")


class OnPolicyConfig(AlgorithmConfig):
    """Fields the on-policy strategy reads: rollout length and the GAE discounting."""

    rollout_steps: int = Field(128, ge=1, le=100_000, description="Env steps per env collected before each update.")
    gamma: float = Field(0.99, ge=0.0, le=1.0, description="Discount factor of the extrinsic return.")
    gae_lambda: float = Field(0.95, ge=0.0, le=1.0, description="GAE lambda (1 = Monte-Carlo, 0 = one-step TD).")
    overlap_update: bool = Field(
        False,
        description="Learn from each rollout in a second thread while the envs collect the next one, acted by a "
                    "copy of the agent that still has the weights from before that update (a policy lag of one "
                    "update, which PPO's clipped ratio against the stored log-probabilities absorbs). Faster where "
                    "the update leaves cores idle (1 torch thread, emulator envs); reproducible from the seed and "
                    "across --resume, but not the same run as false. Needs a learner whose weights() leaves out "
                    "the agent's sampling state (PPO's does).")


class ExplorationConfig(StrictModel):
    """An epsilon schedule: decayed per finished episode (as in PPAGE's baselines) or linearly per env step."""

    schedule: Literal["per_episode", "per_step", "constant"] = Field(
        "per_episode", description="per_episode: eps = max(end, eps*decay) after each episode; per_step: linear.")
    start: float = Field(1.0, ge=0.0, le=1.0, description="Epsilon at the start of training.")
    end: float = Field(0.05, ge=0.0, le=1.0, description="Lowest epsilon the schedule reaches.")
    decay: float = Field(0.995, gt=0.0, le=1.0, description="per_episode: multiplier applied after each episode.")
    decay_steps: int = Field(10_000, ge=1, description="per_step: env steps over which epsilon falls linearly to end.")


class OffPolicyConfig(AlgorithmConfig):
    """Fields the off-policy strategy reads."""

    exploration: ExplorationConfig = Field(default_factory=ExplorationConfig, description="Epsilon schedule.")
    actors: int = Field(
        0, ge=0, le=64,
        description="Actor processes feeding the learner (0 = synchronous and exactly reproducible).",
    )
    actor_sync_interval: int = Field(
        1000, ge=1, description="With actors: env steps between pushes of the learner's weights to the actors.")
    actor_lockstep: bool = Field(
        False,
        description="With actors: the learner takes one chunk from each actor in turn and an actor starts its "
                    "next chunk only then, with the weights pushed so far: reproducible from the seed, the same "
                    "transitions from local and Ray actors, but actors wait for the learner (for tests).")


class StopAtConfig(StrictModel):
    """Stop training once a metric reaches a value."""

    metric: str = Field("eval/return", min_length=1,
                        description="eval/<key> (needs eval_interval) or a metrics.csv column such as mean_return.")
    value: float = Field(..., allow_inf_nan=False, description="The threshold (a finite number).")
    mode: Literal[">=", "<="] = Field(">=", description="Stop when metric >= value (or <= value).")


_DEVICE = re.compile(r"^(auto|cpu|cuda(:\d+)?|mps)$")


class RunConfig(StrictModel):
    """One training run: what to train, on what, for how long, and where it is written."""

    algorithm: str = Field(..., min_length=1, description="Registered algorithm name (see `rlf list`).")
    env: str = Field(..., min_length=1, description="Registered environment name, or gym:<id>.")
    steps: int = Field(100_000, ge=1, le=10**12, description="Total env steps to train for (all envs together).")
    seed: int = Field(0, ge=0, le=2**31 - 1, description="Seed for environments, networks and exploration.")
    num_envs: int = Field(1, ge=1, le=1024, description="Environment copies stepped together.")
    vector: str = Field(
        "auto", min_length=1,
        description="Collector that steps the envs (see `rlf list`): sync (in this process), async (one subprocess "
                    "each), any installed one, or auto (the env's preference between sync and async).")
    checkpoint_interval: int = Field(
        50_000, ge=0, description="Env steps between checkpoints (0 = only at the end).")
    log_interval: int = Field(2_000, ge=1, description="Env steps between metric rows (CSV, TensorBoard, progress).")
    run_dir: Path | None = Field(None, description="Run directory (default runs/<algorithm>-<env>-<time>).")
    device: str = Field("auto", description="Torch device for plugins that use one: auto, cpu, cuda, cuda:N, mps.")
    env_timeout: float = Field(
        60.0, gt=0, le=86_400,
        description="Seconds a subprocess env worker may take to answer one reset or step (an off-policy actor or "
                    "A3C worker: to make progress) before it counts as hung.")
    env_restarts: int = Field(
        0, ge=0, le=10_000,
        description="Dead or hung subprocess env workers to replace (a fresh episode on each one's env) in the "
                    "whole run, resumes included, before stopping.")
    save_replay: bool = Field(True, description="Include replay buffers in checkpoints so a resume keeps them.")
    keep_checkpoints: int = Field(
        2, ge=1, le=100,
        description="Checkpoints kept: checkpoint.rlf plus the previous ones as checkpoint-1.rlf, ... (1 = latest only).")
    progress: bool = Field(True, description="Show a progress bar on the console.")
    loggers: list[str] = Field(
        ["csv", "tensorboard", "progress"],
        description="Metric sinks (see `rlf list`); settings in [logger.<name>].")
    callbacks: list[str] = Field(
        [], description="Callbacks plugins registered (see `rlf list`); settings in [callback.<name>].")
    eval_interval: int = Field(
        0, ge=0, description="Env steps between evaluations during training (0 = none; greedy unless "
                             "eval_stochastic): eval.csv, "
                             "TensorBoard eval/..., the best kept as best.rlf.")
    eval_episodes: int = Field(10, ge=1, le=100_000, description="Episodes per evaluation during training.")
    eval_stochastic: bool = Field(
        False, description="Periodic evaluations act as in training (sample the policy, or explore at the "
                           "current epsilon) instead of greedily: a greedy policy can stall in one spot of a "
                           "deterministic env (Mario) where the policy it was trained as does not.")
    stop_at: StopAtConfig | None = Field(
        None, description='Stop early, e.g. {metric="eval/return", value=475}.')

    @field_validator("run_dir", mode="before")
    @classmethod
    def _run_dir(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():  # Path("") would silently mean the current directory
            raise ValueError("must not be empty; name a directory, e.g. run_dir=\"runs/my-run\"")
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        if not _DEVICE.match(value):
            raise ValueError("must be auto, cpu, cuda, cuda:N or mps")
        return value

    @field_validator("loggers", "callbacks")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        repeated = sorted({name for name in value if value.count(name) > 1})
        if repeated:
            raise ValueError(f"lists {', '.join(repeated)} more than once")
        return value

    @model_validator(mode="after")
    def _stop_at_needs_its_metric(self) -> RunConfig:
        if self.stop_at is not None and self.stop_at.metric.startswith("eval/") and not self.eval_interval:
            raise ValueError(f"stop_at.metric {self.stop_at.metric!r} is an evaluation result: set eval_interval "
                             "(e.g. eval_interval=10000) or use a metrics.csv column such as mean_return")
        return self


def describe(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, Any, str]]:
    """(key path, type, default, one-line doc) for every field, nested models flattened."""
    rows = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        path = f"{prefix}{name}"
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows.extend(describe(annotation, prefix=f"{path}."))
            continue
        default = "(required)" if field.is_required() else field.get_default(call_default_factory=True)
        rows.append((path, type_label(annotation), default, field.description or ""))
    return rows


def type_label(annotation: Any) -> str:
    """How `rlf config` names a field's type; a choice lists its allowed values (``one of a, b``)."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "one of " + ", ".join(json.dumps(value) for value in get_args(annotation))
    if origin in (Union, UnionType):
        return " or ".join(type_label(arg) for arg in get_args(annotation))
    if annotation is type(None):
        return "null"
    name = getattr(annotation, "__name__", None) if origin is None else None
    return name or str(annotation).replace("typing.", "")


def _keys(model: type[BaseModel], prefix: str) -> list[str]:
    return [row[0] for row in describe(model, prefix)]


def parse_value(text: str) -> Any:
    """A --set value in TOML syntax (1, 0.5, true, [1, 2], "x"); anything else is a plain string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_overrides(pairs: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``["algo.lr=3e-4", "steps=10"]`` -> ``{"algo": {"lr": 3e-4}, "run": {"steps": 10}}``."""
    layered: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key or any(not part.strip() for part in key.split(".")):
            raise ConfigError(f"--set {pair!r}: expected key=value, e.g. --set algo.lr=0.001")
        section, dot, rest = key.partition(".")
        if not dot or section not in SECTIONS:
            section, rest = "run", key
        node = layered[section]
        *parents, leaf = rest.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {pair!r}: {parent} is set to a value above, so it has no keys")
        node[leaf] = parse_value(raw.strip())
    return layered


MAX_TOML_BYTES = 16 << 20
"""Settings and experiment files are kilobytes; more is a wrong path (a log, a device), refused unread."""


def read_toml(path: Path, what: str = "config file", flag: str = " to --config") -> dict[str, Any]:
    """A TOML file's tables, or one line saying why it cannot be read (``what`` names the file's role)."""
    try:
        with open(path, "rb") as handle:
            # read one byte past the limit: a device (/dev/zero) or a huge file is refused, not read whole
            data = handle.read(MAX_TOML_BYTES + 1)
        if len(data) > MAX_TOML_BYTES:
            raise ConfigError(f"{what} {path} is larger than {MAX_TOML_BYTES // (1 << 20)} MiB (or endless, like a "
                              f"device); a settings file is a few kilobytes: pass the TOML file{flag}")
        return tomllib.loads(data.decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist; pass an existing TOML file{flag}") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a directory; pass a TOML file{flag}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8 TOML") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read ({exc.strerror}); pass a readable TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML ({exc}); fix the syntax and retry") from None


def load_toml(path: Path) -> dict[str, dict[str, Any]]:
    """A config file with [run], [algo], [env] and [collector] tables; top-level keys belong to [run]."""
    data = read_toml(path)
    layered: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"config file {path}: [{key}] must be a table")
            layered[key].update(value)
        elif isinstance(value, dict):
            tables = ", ".join(f"[{section}]" for section in SECTIONS)
            raise ConfigError(f"config file {path}: unknown table [{key}]; use {tables}")
        else:
            layered["run"][key] = value
    return layered


def merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge of nested dicts; ``top`` wins."""
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def validate(model: type[BaseModel], data: Mapping[str, Any], section: str) -> Any:
    """Build ``model`` from ``data``; a failure becomes one ConfigError line naming the field path."""
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, model, section)) from None


def _quoting_hint(key: str, kind: str, got: Any) -> str:
    """`--set loggers=[csv]` is not TOML (bare words), so it arrives as the string '[csv]': say how to quote."""
    if kind not in ("list_type", "dict_type") or not isinstance(got, str) or got.strip()[:1] not in "[{":
        return ""
    opening = got.strip()[0]
    words = [w.strip() for w in got.strip()[1:].rstrip("]}").split(",") if w.strip()]
    if opening == "[":
        example = "[" + ", ".join(f'"{w.strip(chr(34) + chr(39))}"' for w in words) + "]"
        return f"; TOML strings need quotes, inside a list too: --set '{key}={example}'"
    return f"; a TOML table's string values need quotes: --set '{key}={{key = \"value\"}}'"


def format_validation_error(exc: ValidationError, model: type[BaseModel], section: str) -> str:
    problems = []
    known = _keys(model, "")
    for error in exc.errors():
        path = ".".join(str(part) for part in error["loc"])
        full = (f"{section}.{path}" if path else section) if section != "run" else (path or "run")
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(path, known, n=1)
            hint = f"; did you mean {section}.{close[0]}?" if close and section != "run" else (
                f"; did you mean {close[0]}?" if close else "")
            problems.append(f"unknown key {full!r}{hint} (see `rlf config`)")
        else:
            message = error["msg"].removeprefix("Value error, ")
            got = error.get("input")
            shown = got is not None and not isinstance(got, dict)  # a whole section is no help to show
            problems.append((f"{full}: {message} (got {got!r})" if shown else f"{full}: {message}")
                            + _quoting_hint(full, error["type"], got) + error.get("ctx", {}).get("hint", ""))
    fix = " Fix it with --set KEY=VALUE or in the config file." if problems else ""
    return "invalid config: " + "; ".join(problems) + "." + fix

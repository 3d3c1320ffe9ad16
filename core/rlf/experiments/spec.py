"""``rlf experiment FILE``: train every algorithm of an experiment file in every setting with the same
environment, budget and seeds, resumably, then write the comparison table and the learning curves.

The file (TOML)::

    [experiment]
    env = "mario"                 # one environment for every run
    steps = 100_000               # env steps per run
    seeds = [0]
    runs_dir = "runs/mario-1-1"   # <runs_dir>/<setting>/<algorithm>-seed<N>/ (relative to the cwd)
    metrics = ["x_pos_max", "flag"]
    last = 100                    # final performance: the last N training episodes
    eval_episodes = 20            # then evaluation episodes per finished run and mode (0 = none)
    eval_modes = ["greedy", "stochastic"]  # greedy (default), acting as in training, and/or fixed-start:
    fixed_start = ["env.noop_max=0"]       #   greedy from the start these --set overrides make identical

    [run]  / [algo] / [env]       # shared by every run, as in `rlf train --config`

    [settings.game]               # each setting adds its own run/algo/env tables
    [settings.sparse.env]
    extrinsic_reward = "flag"

    [algorithms.ppo]              # in the order they should run; each may add
    seeds = [0, 1]                #   seeds, settings = [...] (a subset), config = "file.toml"
    steps = 1_000_000             #   (relative to this file), its own budget (steps = N, or a table
                                  #   {setting = N}) and its own
    until = {metric = "flag", value = 0.5, every = 200_000, settings = ["game"]}
                                  #   (optional) the budget becomes a cap: the run ends once an
                                  #   evaluation of eval_episodes episodes (mode "stochastic" or
                                  #   "greedy") reaches the value; checked every `every` env steps
    [algorithms.random]           #   run/algo/env tables

Layering for one run, lowest first: the algorithm's defaults < the shared tables < the algorithm's
config file < its own tables < the setting's tables < ``--set``. The setting comes last because it is
what the comparison is about.

A run is done when its checkpoint has reached the budget; a run with a checkpoint short of it is resumed
exactly as ``rlf train --resume`` would; a directory with no checkpoint yet (killed before the first
one) is moved aside and the run starts over. Each run holds a lock file while it trains, so the same
command started twice (e.g. once per core) shares the work instead of duplicating it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    StrictInt,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from rlf.config import SECTIONS, load_toml, merge, parse_overrides, read_toml
from rlf.errors import ConfigError
from rlf.storage import rundir

FINAL_EVAL_FILES = {"greedy": "final_eval.csv", "stochastic": "final_eval_stochastic.csv",  # results.SOURCES
                    "fixed-start": "final_eval_fixed_start.csv"}
FINAL_EVAL_SOURCES = {"greedy": "final", "stochastic": "final-stochastic", "fixed-start": "final-fixed-start"}
FIXED_START_EPISODES = 1
"""A greedy policy from an identical start plays one and the same episode every time."""
DONE_FILE = "experiment.json"
CHECKS_FILE = "checks.csv"
"""Every `until` check of a run: env step, metric, value, target, mode, episodes, reached, time."""


@dataclass
class PlannedRun:
    name: str                              # <setting>/<entry>-seed<N>
    setting: str
    entry: str                             # its [algorithms.<entry>] table (a variant's own name)
    algorithm: str                         # the plugin that trains it
    seed: int
    config: dict[str, dict[str, Any]]
    path: Path
    steps: int                             # this run's budget in env steps
    until: Until | None = None             # the target that ends it before its budget


@dataclass(frozen=True)
class Until:
    """Stop a run before its budget once an evaluation of its checkpoint reaches a target."""

    metric: str                            # a key of the evaluation's results (an env metric such as flag)
    value: float
    mode: str                              # greedy or stochastic, as the final evaluation's modes
    every: int                             # env steps between checks
    episodes: int                          # the experiment's eval_episodes: the check is the final evaluation


@dataclass
class Experiment:
    path: Path
    env: str
    steps: int
    runs_dir: Path
    metrics: list[str]
    last: int
    eval_episodes: int
    eval_modes: list[str]
    fixed_start: list[str]                 # --set overrides of the fixed-start evaluation
    plot_metric: str
    smooth: int
    runs: list[PlannedRun]


def _component(name: Any) -> str:
    """A setting or algorithm name becomes one directory of ``<runs_dir>/<setting>/<algorithm>-seed<N>``:
    only a single path component keeps every run inside the runs directory."""
    if not isinstance(name, str) or not name.strip() or name in (".", "..") or name.startswith(".") \
            or any(c in name for c in "/\\\0") or not name.isprintable() or len(name) > 100:
        raise _custom(f"{name!r} is not usable as a directory name: use letters, digits, '-' or '_' (no '/', "
                      "no leading '.', at most 100 characters)")
    return name


def _custom(text: str) -> PydanticCustomError:
    return PydanticCustomError("rlf", "{text}", {"text": text})  # the text as is, braces included


def _whole_budget(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_STEPS:
        raise _custom(f"the budget must be a whole number of env steps, at least 1 (and at most {MAX_STEPS:,})")
    return value


MAX_STEPS = 10**12
Name = Annotated[str, BeforeValidator(_component)]
Budget = Annotated[int, BeforeValidator(_whole_budget)]
Seed = Annotated[StrictInt, Field(ge=0, le=2**31 - 1)]
Tables = dict[str, Any]
# steps = N for every setting, or {setting = N, ...}; tagged, so an error names the one meant
PerSettingBudget = Annotated[Annotated[Budget, Tag("n")] | Annotated[dict[Name, Budget], Tag("table")],
                             Discriminator(lambda value: "table" if isinstance(value, dict) else "n")]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ExperimentHead(_Model):
    """The ``[experiment]`` table."""

    env: str = Field(min_length=1)
    steps: Budget = 100_000
    seeds: list[Seed] = Field([0], min_length=1, max_length=1000)
    runs_dir: str | None = Field(None, min_length=1)
    metrics: list[Annotated[str, Field(min_length=1)]] = Field(["return"], min_length=1, max_length=100)
    last: int = Field(100, ge=1, le=10**9)
    eval_episodes: int = Field(0, ge=0, le=100_000)
    eval_modes: list[Literal["greedy", "stochastic", "fixed-start"]] = Field(["greedy"], min_length=1)
    fixed_start: list[Annotated[str, Field(min_length=1)]] = Field([], max_length=100, validate_default=True)
    plot_metric: str | None = Field(None, min_length=1)
    smooth: int = Field(10, ge=1, le=100_000)
    description: str = ""

    @field_validator("fixed_start")
    @classmethod
    def _fixed_start(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if "fixed-start" in info.data.get("eval_modes", ()) and not value:
            raise _custom('eval mode "fixed-start" needs the --set overrides that make every start identical, '
                          'e.g. fixed_start = ["env.noop_max=0"]')
        try:
            parse_overrides(value)  # a bad one is found now, not after the runs trained
        except ConfigError as exc:
            raise _custom(str(exc)) from None
        return value

    @field_validator("env", "runs_dir", "plot_metric")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise _custom("must not be blank")
        return value


class SettingTables(_Model):
    """A ``[settings.<name>]`` table: what it changes in every run of that setting."""

    run: Tables = {}
    algo: Tables = {}
    env: Tables = {}
    collector: Tables = {}
    logger: Tables = {}
    callback: Tables = {}


class UntilTable(_Model):
    """``until = {metric = "flag", value = 0.5, every = 200_000}``: the budget is a cap, and the run ends
    at the first check (every ``every`` env steps, and on every resume) whose evaluation of
    ``eval_episodes`` episodes reaches ``value``. The check is the same evaluation as the final one of
    its mode (same episodes), so the published evaluation of a run that stopped is the one that stopped it."""

    metric: str = Field(min_length=1)
    value: float = Field(allow_inf_nan=False)
    mode: Literal["greedy", "stochastic"] = "stochastic"
    every: Budget
    settings: list[Name] | None = Field(None, min_length=1)

    @field_validator("value", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)  # strict mode takes no int for a float; 1 means 1.0 here
        return value


class AlgorithmEntry(SettingTables):
    """An ``[algorithms.<name>]`` table: the algorithm ``<name>``, or a variant of the one ``algorithm``
    names (``[algorithms.appo-epochs4]`` with ``algorithm = "appo"``: one algorithm twice, with
    different settings, its runs named after the table)."""

    algorithm: str | None = Field(None, min_length=1)
    seeds: list[Seed] | None = Field(None, min_length=1, max_length=1000)
    settings: list[Name] | None = Field(None, min_length=1)
    config: str | None = Field(None, min_length=1)
    steps: PerSettingBudget | None = None
    until: UntilTable | None = None


class ExperimentFile(SettingTables):
    """The whole file: its own run/algo/env/... tables are shared by every run."""

    experiment: ExperimentHead
    settings: dict[Name, SettingTables] = {}
    algorithms: dict[Name, AlgorithmEntry] = Field(min_length=1)


def _problem(exc: ValidationError, where: str, data: Any = None) -> ConfigError:
    """The first validation error as one line: the table, the key, the value and what to give."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    value = error.get("input")
    while loc and loc[-1].isdigit() and isinstance(data, dict):  # a list's item: show the whole list
        loc.pop()
        value = _lookup(data, loc, value)
    if not loc:
        return ConfigError(f"{where}: {error['msg']}")
    if len(loc) == 1 and error["type"] == "extra_forbidden":
        return ConfigError(f"{where}: unknown table(s) [{loc[0]!r}]; allowed: {', '.join(_allowed(''))}")
    if loc[0] == "algorithms" and len(loc) == 1:
        return ConfigError(f"{where}: no [algorithms.<name>] tables; add one per algorithm to train")
    if loc == ["experiment", "env"] and error["type"] == "missing":
        return ConfigError(f'{where}: [experiment] needs env = "..." (one environment for every run)')
    if loc[0] in ("experiment", *SECTIONS) and len(loc) == 1:
        return ConfigError(f"{where}: [{loc[0]}] must be a table")
    table, keys = (loc[0], loc[1:]) if loc[0] == "experiment" or len(loc) < 2 else (f"{loc[0]}.{loc[1]}", loc[2:])
    if keys and keys[-1] == "[key]":  # a table's name
        inner = [key for key in loc[2:-2] if key not in ("n", "table")]
        return ConfigError(f"{where} [{loc[0]}{'.' + loc[1] if inner else ''}] {'.'.join(inner)}: {error['msg']}"
                           .replace(" :", ":"))
    if loc[:1] == ["algorithms"] and keys[:1] == ["steps"]:
        keys = ["steps", *keys[2:]]  # drop the union's tag (n or table)
    key = ".".join(keys)
    if error["type"] == "extra_forbidden":
        return ConfigError(f"{where} [{table}]: unknown key(s) [{key!r}]; allowed: "
                           f"{', '.join(_allowed(loc[0]))}")
    if error["type"] == "missing":
        return ConfigError(f"{where} [{table}]: {key} is missing")
    if not key:
        return ConfigError(f"{where}: [{table}] must be a table")
    shown = "" if isinstance(value, dict) else f" = {value!r}"
    return ConfigError(f"{where} [{table}] {key}{shown}: {_message(error)}")


def _lookup(data: dict, loc: list[str], default: Any) -> Any:
    for key in loc:
        if not isinstance(data, dict) or key not in data:
            return default
        data = data[key]
    return data


def _allowed(table: str) -> list[str]:
    model = {"experiment": ExperimentHead, "settings": SettingTables, "algorithms": AlgorithmEntry}.get(table)
    return sorted(model.model_fields) if model else sorted(ExperimentFile.model_fields)


def _message(error: dict) -> str:
    message = error["msg"]
    if error["type"] == "literal_error" and error["loc"][-2:-1] == ("eval_modes",):
        return "give a non-empty list of 'greedy', 'stochastic' and/or 'fixed-start'"
    return message[0].lower() + message[1:] if message else message


def load_experiment(path: Path, *, steps: int | None = None, seeds: Sequence[int] | None = None,
                    eval_episodes: int | None = None,
                    runs_dir: Path | str | None = None, only: Sequence[str] = (), overrides: Sequence[str] = ()
                    ) -> Experiment:
    """Parse, validate and expand an experiment file into its runs (``check_runs`` then resolves each)."""
    path = Path(path)
    where = f"experiment file {path}"
    data = _read(path)
    try:
        parsed = ExperimentFile.model_validate(data)
    except ValidationError as exc:
        raise _problem(exc, where, data) from None
    given = {key: value for key, value in (("steps", steps), ("seeds", None if seeds is None else list(seeds)),
                                           ("eval_episodes", eval_episodes),
                                           ("runs_dir", None if runs_dir is None else str(runs_dir)))
             if value is not None}
    try:
        head = ExperimentHead.model_validate({**parsed.experiment.model_dump(exclude_unset=True), **given})
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else ""
        if key not in given:
            raise _problem(exc, where) from None
        raise ConfigError(f"--{key.replace('_', '-')} {given[key]!r}: {_message(error)}") from None
    settings = parsed.settings or {"default": SettingTables()}
    for algorithm, spec in parsed.algorithms.items():
        missing = sorted(set(spec.settings or ()) - set(settings))
        if missing:
            raise ConfigError(f"{where} [algorithms.{algorithm}]: unknown setting(s) {missing}; "
                              f"defined: {', '.join(settings)}")
        missing = sorted(set(spec.steps) - set(settings)) if isinstance(spec.steps, dict) else []
        if missing:
            raise ConfigError(f"{where} [algorithms.{algorithm}] steps: unknown setting(s) {missing}; "
                              f"defined: {', '.join(settings)}")
        if spec.until is not None:
            missing = sorted(set(spec.until.settings or ()) - set(settings))
            if missing:
                raise ConfigError(f"{where} [algorithms.{algorithm}] until.settings: unknown setting(s) {missing}; "
                                  f"defined: {', '.join(settings)}")
            if head.eval_episodes < 1:
                raise ConfigError(f"{where} [algorithms.{algorithm}] until: the target is checked by evaluating "
                                  "eval_episodes episodes; set [experiment] eval_episodes (e.g. 20)")
    extra = parse_overrides(overrides)
    _no_run_budget(where, "--set", extra)
    _no_run_budget(where, "[run]", {"run": parsed.run})
    for name, tables in [*((f"[settings.{n}.run]", t) for n, t in parsed.settings.items()),
                         *((f"[algorithms.{n}.run]", t) for n, t in parsed.algorithms.items())]:
        _no_run_budget(where, name, {"run": tables.run})
    out_dir = rundir.validate(head.runs_dir if head.runs_dir is not None else f"runs/{path.stem}",
                              what="runs directory")
    shared = {section: getattr(parsed, section) for section in SECTIONS}
    planned: list[PlannedRun] = []
    for setting, setting_tables in settings.items():
        for algorithm, spec in parsed.algorithms.items():
            if spec.settings is not None and setting not in spec.settings:
                continue
            config: dict[str, Any] = {section: {} for section in SECTIONS}
            config = merge(config, shared)
            if spec.config is not None:
                config = merge(config, load_toml(path.parent / spec.config))
            config = merge(config, {s: getattr(spec, s) for s in SECTIONS})
            config = merge(config, {s: getattr(setting_tables, s) for s in SECTIONS})
            config = merge(config, extra)
            algo_seeds = list(seeds) if seeds is not None else (spec.seeds or head.seeds)
            # --steps on the command line wins over every file budget (a quick trial of the whole file)
            run_budget = head.steps if steps is not None else _algorithm_budget(spec, setting, head.steps)
            target = spec.until
            until = None if target is None or (target.settings is not None and setting not in target.settings) \
                else Until(target.metric, target.value, target.mode, target.every, head.eval_episodes)
            for seed in dict.fromkeys(algo_seeds):
                name = f"{setting}/{algorithm}-seed{seed}"
                run_config = merge(config, {"run": {"steps": run_budget, "seed": int(seed)}})
                planned.append(PlannedRun(name, setting, algorithm, spec.algorithm or algorithm, int(seed), run_config,
                                          out_dir / name, run_budget, until))
    if only:
        planned = [run for run in planned if any(fnmatch.fnmatchcase(run.name, p) for p in only)]
        if not planned:
            raise ConfigError(f"--only {' '.join(only)} matches none of this experiment's runs "
                              "(names are <setting>/<algorithm>-seed<N>; see --dry-run)")
    return Experiment(path, head.env, head.steps, out_dir, list(head.metrics), head.last, head.eval_episodes,
                      list(dict.fromkeys(head.eval_modes)), list(head.fixed_start),
                      head.plot_metric or head.metrics[0], head.smooth, planned)


def _no_run_budget(where: str, origin: str, layer: dict[str, Any]) -> None:
    """run.steps and run.seed are the experiment's own (steps, seeds): a run table's would be overwritten."""
    run = layer.get("run") if isinstance(layer.get("run"), dict) else {}
    for key, instead in (("steps", "steps = N in [experiment] or an [algorithms.<name>] table, or --steps"),
                         ("seed", "seeds = [...] in [experiment] or an [algorithms.<name>] table, or --seeds")):
        if key in run:
            raise ConfigError(f"{where}: {origin} sets run.{key}, which an experiment sets per run; use {instead}")


def _read(path: Path) -> dict[str, Any]:
    return read_toml(path, "experiment file", "")


def _algorithm_budget(spec: AlgorithmEntry, setting: str, default: int) -> int:
    """``steps = N`` for every setting, or ``steps = {game = N, none = M}`` (a setting left out: the default)."""
    if isinstance(spec.steps, dict):
        return spec.steps.get(setting, default)
    return default if spec.steps is None else spec.steps

"""``rlf tune``: a hyperparameter search over an algorithm's settings on Optuna.

A search space is a TOML file with one table per setting (``[algo.lr] type = "float"``...); every trial
is one or more normal runs (``<study-dir>/trial-<number>-seed<seed>/``) whose periodic evaluation feeds
Optuna's pruner, and whose final evaluations, averaged over the seeds, are the trial's value. The study
lives in a database (a SQLite file by default), so a killed search resumes and several processes, on one
machine or many, share it. Trials run in worker processes, never threads: ``train()`` owns the process's
global random generators (see ``Algorithm.train``).

Optuna is an optional dependency (``pip install rlf[tune]``); only this module imports it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import socket
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rlf.config import SECTIONS, load_toml, merge, parse_overrides, read_toml
from rlf.errors import ConfigError, RlfError
from rlf.logging.callbacks import Callback

SAMPLERS = ("tpe", "random", "cmaes")
PRUNERS = ("median", "halving", "none")
DIRECTIONS = ("maximize", "minimize")
TYPES = ("float", "int", "categorical")
_FIELDS = {"float": {"low", "high", "log", "step"}, "int": {"low", "high", "log", "step"},
           "categorical": {"choices"}}
_SET_BY_TUNE = {"run.seed": "--seed and --seeds", "run.run_dir": "--study-dir", "run.steps": "--steps",
                "run.eval_interval": "--eval-interval", "run.algorithm": "the command line", "run.env": "--env"}
"""Settings a space may not search: rlf tune sets them itself (the option that does)."""

STUDY_FILE = "study.db"
BEST_FILE = "best.toml"


# -- the search space -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Param:
    """One searched setting: ``key`` is its dotted config path (``algo.lr``)."""

    key: str
    type: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] = ()
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    """Sampled only when every named key took one of the listed values."""

    def probe_values(self) -> list[Any]:
        """The values that bound the range, to check the config accepts them before any trial."""
        if self.type == "categorical":
            return list(self.choices)
        return [self.low, self.high]


def _label(value: Any) -> Any:
    """A choice as Optuna stores it: scalars as they are, lists and tables as their JSON."""
    return value if value is None or isinstance(value, bool | int | float | str) else json.dumps(value)


def load_space(path: Path) -> list[Param]:
    """The space file's parameters, in an order where every condition's key comes first."""
    return parse_space(read_toml(Path(path), what="search space", flag=" to --space"), str(path))


def parse_space(data: Mapping[str, Any], source: str = "the search space") -> list[Param]:
    params: dict[str, Param] = {}
    for section, table in data.items():
        if section not in SECTIONS:
            raise ConfigError(f"{source}: unknown table [{section}]; a space's tables are settings such as "
                              f"[algo.lr], under {', '.join(f'[{s}]' for s in SECTIONS)}")
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: {section} must be a table of settings, e.g. [{section}.lr] with "
                              'type = "float", low = 1e-5, high = 1e-3')
        _collect(table, section, source, params)
    if not params:
        raise ConfigError(f"{source}: the space names no setting; add a table such as [algo.lr] with "
                          'type = "float", low = 1e-5, high = 1e-3, log = true')
    for param in params.values():
        for key, values in param.when:
            other = params.get(key)
            if other is None:
                raise ConfigError(f"{source}: [{param.key}] is sampled when {key} takes a value, but {key} is not in "
                                  f"the space; add [{key}] to the space or drop the condition")
            if other.type == "categorical":
                unknown = [v for v in values if _label(v) not in {_label(c) for c in other.choices}]
                if unknown:
                    raise ConfigError(f"{source}: [{param.key}]'s condition on {key} names {unknown[0]!r}, which is "
                                      f"not one of {key}'s choices {list(other.choices)}; use one of them")
    return _ordered(params, source)


def _collect(table: Mapping[str, Any], prefix: str, source: str, params: dict[str, Param]) -> None:
    for name, value in table.items():
        key = f"{prefix}.{name}"
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}: {key} = {value!r} is not a parameter table; give [{key}] with type = "
                              '"float", "int" or "categorical" (fixed settings go in --config or --set)')
        if "type" in value and not isinstance(value["type"], Mapping):
            params[key] = _param(key, value, source)
        else:  # a nested setting, e.g. [algo.net.hidden]
            _collect(value, key, source, params)


def _param(key: str, table: Mapping[str, Any], source: str) -> Param:
    where = f"{source}: [{key}]"
    kind = table["type"]
    if kind not in TYPES:
        raise ConfigError(f"{where}: unknown type {kind!r}; use one of {', '.join(map(repr, TYPES))}")
    if key in _SET_BY_TUNE:
        raise ConfigError(f"{where}: {key} is set by rlf tune ({_SET_BY_TUNE[key]}); drop it from the space")
    unknown = sorted(set(table) - _FIELDS[kind] - {"type", "when"})
    if unknown:
        raise ConfigError(f"{where}: unknown field {unknown[0]!r} for a {kind} parameter; use "
                          f"{', '.join(sorted(_FIELDS[kind] | {'when'}))}")
    when = _when(where, table["when"]) if "when" in table else ()
    if kind == "categorical":
        choices = table.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f'{where}: choices must be a non-empty list, e.g. choices = ["tanh", "relu"]')
        if len({json.dumps(c, sort_keys=True) for c in choices}) != len(choices):
            raise ConfigError(f"{where}: choices {choices} lists a value twice; list each once")
        return Param(key, kind, choices=tuple(choices), when=when)
    number = int if kind == "int" else (int, float)
    for field in ("low", "high"):
        if field not in table:
            raise ConfigError(f"{where}: a {kind} parameter needs low and high, e.g. low = 1, high = 10")
        if isinstance(table[field], bool) or not isinstance(table[field], number):
            raise ConfigError(f"{where}: {field} = {table[field]!r} is not {'a whole number' if kind == 'int' else 'a number'}")
        if not math.isfinite(table[field]):
            raise ConfigError(f"{where}: {field} must be finite, not {table[field]!r}")
    low, high, log, step = table["low"], table["high"], table.get("log", False), table.get("step")
    if low >= high:
        raise ConfigError(f"{where}: low = {low!r} must be below high = {high!r}; swap them or widen the range")
    if not isinstance(log, bool):
        raise ConfigError(f"{where}: log must be true or false, not {log!r}")
    if log and low <= 0:
        raise ConfigError(f"{where}: a log scale needs low > 0 (got low = {low!r}); raise low or set log = false")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, number) or not step > 0:
            raise ConfigError(f"{where}: step must be a positive {'whole number' if kind == 'int' else 'number'}, "
                              f"not {step!r}")
        if log and (kind == "float" or step != 1):
            raise ConfigError(f"{where}: Optuna samples a log scale without a step; drop step or set log = false")
    if kind == "float":
        low, high = float(low), float(high)
    return Param(key, kind, low, high, log, step, when=when)


def _when(where: str, when: Any) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(when, Mapping) or not when:
        raise ConfigError(f'{where}: when must be a table of conditions, e.g. when = {{"algo.schedule" = "linear"}}')
    conditions = []
    for key, value in when.items():
        values = tuple(value) if isinstance(value, list) else (value,)
        if not values:
            raise ConfigError(f"{where}: the condition on {key} lists no value; name the value(s) it must take")
        conditions.append((key, values))
    return tuple(conditions)


def _ordered(params: dict[str, Param], source: str) -> list[Param]:
    done: dict[str, Param] = {}
    visiting: list[str] = []

    def visit(param: Param) -> None:
        if param.key in done:
            return
        if param.key in visiting:
            loop = " -> ".join([*visiting[visiting.index(param.key):], param.key])
            raise ConfigError(f"{source}: the conditions form a loop ({loop}); a key cannot depend on itself")
        visiting.append(param.key)
        for key, _ in param.when:
            visit(params[key])
        visiting.pop()
        done[param.key] = param

    for param in params.values():
        visit(param)
    return list(done.values())


def sample(trial, space: Sequence[Param]) -> dict[str, Any]:
    """One point of the space from an Optuna trial: ``{"algo.lr": 3e-4, ...}`` (a conditional key whose
    condition failed is absent, so the run keeps the fixed setting)."""
    chosen: dict[str, Any] = {}
    for param in space:
        if not all(key in chosen and _label(chosen[key]) in {_label(v) for v in values} for key, values in param.when):
            continue
        if param.type == "float":
            chosen[param.key] = trial.suggest_float(param.key, param.low, param.high, log=param.log, step=param.step)
        elif param.type == "int":
            chosen[param.key] = trial.suggest_int(param.key, param.low, param.high, log=param.log,
                                                  step=param.step or 1)
        else:
            labels = [_label(c) for c in param.choices]
            chosen[param.key] = param.choices[labels.index(trial.suggest_categorical(param.key, labels))]
    return chosen


def decode(space: Sequence[Param], params: Mapping[str, Any]) -> dict[str, Any]:
    """A stored trial's params (choices as Optuna keeps them) as config values."""
    by_key = {param.key: param for param in space}
    out = {}
    for key, value in params.items():
        param = by_key.get(key)
        if param is not None and param.type == "categorical":
            labels = [_label(c) for c in param.choices]
            value = param.choices[labels.index(value)] if value in labels else value
        out[key] = value
    return out


def nested(params: Mapping[str, Any]) -> dict[str, Any]:
    """``{"algo.lr": 1e-3}`` -> ``{"algo": {"lr": 1e-3}}``."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        *parents, last = key.split(".")
        table = out
        for part in parents:
            table = table.setdefault(part, {})
        table[last] = value
    return out


# -- options ----------------------------------------------------------------------------------------


@dataclasses.dataclass
class TuneOptions:
    """What ``rlf tune`` was asked (the CLI's options; picklable, for the worker processes)."""

    algorithm: str
    env: str | None
    space: Path
    config_file: Path | None = None
    overrides: list[str] = dataclasses.field(default_factory=list)
    preset: bool = True
    trials: int = 20
    jobs: int = 1
    seeds: int = 1
    metric: str = "return"
    direction: str = "maximize"
    sampler: str = "tpe"
    sampler_seed: int | None = None
    pruner: str = "median"
    startup_trials: int = 5
    eval_interval: int | None = None
    study: str | None = None
    study_dir: Path | None = None
    storage: str | None = None
    keep_pruned: bool = False
    launcher: str = "processes"
    """Where the ``jobs`` worker loops run: ``processes`` (this machine) or a plugin's (``ray``)."""
    address: str | None = None
    """The launcher's cluster (``ray``: local, auto, ray://HOST:10001, HOST:PORT; unset: its default)."""

    @property
    def study_name(self) -> str:
        return self.study or re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{self.algorithm}-{self.env or 'default'}").strip("-")

    @property
    def directory(self) -> Path:
        return Path(self.study_dir) if self.study_dir is not None else Path("runs") / f"tune-{self.study_name}"

    @property
    def storage_url(self) -> str:
        return self.storage or f"sqlite:///{(self.directory / STUDY_FILE).resolve()}"


@dataclasses.dataclass
class Plan:
    """The options checked: the space, the fixed settings, and what every trial runs."""

    options: TuneOptions
    space: list[Param]
    fixed: dict[str, Any]
    """The user's settings under the searched ones (``--config`` file, made a ``config=`` layer)."""
    overrides: list[str]
    """``--set`` and the options that stand for settings, above the searched ones."""
    steps: int
    seed: int
    eval_interval: int
    preset: bool

    @property
    def seeds(self) -> list[int]:
        return [self.seed + i for i in range(self.options.seeds)]

    def resolve(self, params: Mapping[str, Any], *extra: str, registry=None):
        from rlf.resolution import resolve

        return resolve(self.options.algorithm, self.options.env, config=merge(self.fixed, nested(params)),
                       overrides=[*self.overrides, *extra], registry=registry, preset=self.preset)


def plan(options: TuneOptions, registry=None) -> Plan:
    """Everything that can be wrong before a trial starts, as one ConfigError: the options, the space,
    and every searched setting at both ends of its range against the config."""
    for name, value, allowed in (("--sampler", options.sampler, SAMPLERS), ("--pruner", options.pruner, PRUNERS),
                                 ("--direction", options.direction, DIRECTIONS)):
        if value not in allowed:
            raise ConfigError(f"{name} {value!r} is not one of {', '.join(allowed)}; pick one of them")
    for name, value, least in (("--trials", options.trials, 1), ("--jobs", options.jobs, 1),
                               ("--seeds", options.seeds, 1), ("--startup-trials", options.startup_trials, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"{name} must be a whole number >= {least}, not {value!r}")
    if options.eval_interval is not None and options.eval_interval < 1:
        raise ConfigError(f"--eval-interval must be a number of env steps >= 1, not {options.eval_interval!r}")
    if options.sampler == "cmaes":
        import importlib.util

        if importlib.util.find_spec("cmaes") is None:
            raise ConfigError("--sampler cmaes needs the cmaes package: pip install cmaes (or use --sampler tpe)")
    space = load_space(options.space)
    given = parse_overrides(options.overrides)
    for param in space:
        section, _, rest = param.key.partition(".")
        table = given.get(section, {})
        for part in rest.split(".")[:-1]:
            table = table.get(part, {}) if isinstance(table, Mapping) else {}
        if isinstance(table, Mapping) and rest.split(".")[-1] in table:
            raise ConfigError(f"{param.key} is searched (the space) and fixed (--set); drop one of them")
    fixed = load_toml(options.config_file) if options.config_file else {}
    preset = options.preset and options.config_file is None  # a config file replaces the preset, as in train
    overrides = list(options.overrides)
    probe = Plan(options, space, fixed, overrides, 0, 0, 0, preset).resolve({}, "progress=false", registry=registry)
    run = probe.run
    interval = options.eval_interval or run.eval_interval or max(run.steps // 10, 1)
    overrides += [f"eval_interval={interval}"]
    checked = Plan(options, space, fixed, overrides, run.steps, run.seed, interval, preset)
    for param in space:  # both ends of every range, and every choice, must be settings the config accepts
        for value in param.probe_values():
            try:
                checked.resolve({param.key: value}, "progress=false", registry=registry)
            except ConfigError as exc:
                raise ConfigError(f"search space {options.space}: [{param.key}] at {value!r}: {exc}") from None
    _check_storage(options)
    return checked


def _check_storage(options: TuneOptions) -> None:
    if options.storage is None:
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    fix = "give a SQLAlchemy URL such as sqlite:///study.db or postgresql://user:password@host/database"
    try:
        url = make_url(options.storage)
        url.get_dialect()
    except NoSuchModuleError:  # before ArgumentError, its base class
        raise ConfigError(f"--storage {options.storage!r}: SQLAlchemy has no database kind {url.drivername!r}; "
                          f"{fix}") from None
    except (ArgumentError, ValueError) as exc:
        raise ConfigError(f"--storage {options.storage!r} is not a database URL ({exc}); {fix}") from None
    except ImportError as exc:
        raise ConfigError(f"--storage {options.storage!r} needs the database driver {exc.name or exc}: "
                          "pip install it") from None


# -- the study --------------------------------------------------------------------------------------


def _storage(options: TuneOptions):
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            # heartbeats let a process on another machine see a trial whose process died (its state is RUNNING)
            return optuna.storages.RDBStorage(options.storage_url, heartbeat_interval=30, grace_period=120)
    except ImportError as exc:
        raise ConfigError(f"--storage {options.storage_url!r} needs the database driver {exc.name or exc}: pip install "
                          "it") from None
    except (SQLAlchemyError, ValueError) as exc:
        text = " ".join(str(exc).split("\n")[0].split())
        raise ConfigError(f"--storage {options.storage_url!r}: the database could not be opened ({text}); check the "
                          "URL, that the server is reachable and the user may create tables") from None


def _sampler(options: TuneOptions, worker: int, already: int):
    import optuna

    # each process (and each resumption) gets its own stream: equal seeds would sample equal points
    seed = None if options.sampler_seed is None else options.sampler_seed + 1_000 * worker + already
    if options.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if options.sampler == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=options.startup_trials)
    return optuna.samplers.TPESampler(seed=seed, constant_liar=options.jobs > 1)


def _pruner(options: TuneOptions):
    import optuna

    if options.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=options.startup_trials)
    if options.pruner == "halving":
        return optuna.pruners.SuccessiveHalvingPruner()
    return optuna.pruners.NopPruner()


def _quiet_optuna() -> None:
    import optuna

    # rlf prints one line per trial itself; Optuna's INFO lines would double them
    optuna.logging.set_verbosity(optuna.logging.ERROR)


def _open_study(options: TuneOptions, worker: int = 0, create: bool = False):
    import optuna

    _quiet_optuna()
    storage = _storage(options)
    try:
        if create:
            study = optuna.create_study(storage=storage, study_name=options.study_name, direction=options.direction,
                                        load_if_exists=True)
            if study.direction.name.lower() != options.direction:
                raise ConfigError(f"study {options.study_name!r} in {options.storage_url} was made to "
                                  f"{study.direction.name.lower()}, not to {options.direction}; pass "
                                  f"--direction {study.direction.name.lower()} or another --study")
        study_id = storage.get_study_id_from_name(options.study_name)
        already = len(storage.get_all_trials(study_id, deepcopy=False))
        return optuna.load_study(study_name=options.study_name, storage=storage,
                                 sampler=_sampler(options, worker, already), pruner=_pruner(options))
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"study {options.study_name!r}: {exc}") from None


def _lost(trial) -> bool:
    """A trial whose process died (killed, or stopped with Ctrl-C) rather than one that failed."""
    return trial.state.name == "FAIL" and "error" not in trial.user_attrs and not _surplus(trial)


def _surplus(trial) -> bool:
    """A trial that two workers' checks of the count let in beyond ``--trials`` (see ``work``): not run."""
    return bool(trial.user_attrs.get("surplus"))


def _is_counted(trial) -> bool:
    return trial.state.name != "WAITING" and not _lost(trial) and not _surplus(trial)


def _counted(trials) -> int:
    """Trials run or running (queued ones are not: they wait for a process to run them)."""
    return sum(1 for t in trials if _is_counted(t))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(study, options: TuneOptions, say: Callable[[str], None]) -> int:
    """Trials a killed process left: those it was running on this machine become failed, and each lost
    trial is queued again with its settings (once), so the study ends with the trials it was asked for.
    Returns how many were queued."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        pid = trial.user_attrs.get("pid")
        if trial.user_attrs.get("host") == host and isinstance(pid, int) and not _alive(pid):
            study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("retry_of") for t in trials}
    queued = 0
    for trial in trials:
        if _lost(trial) and trial.number not in retried:
            study.enqueue_trial(trial.params, user_attrs={"retry_of": trial.number})
            queued += 1
            say(f"trial {trial.number} was lost with its process: queued again with its settings")
            _remove_dirs(options.directory, trial.number)
    return queued


def _remove_dirs(directory: Path, number: int) -> None:
    from rlf.api import remove_run

    for path in sorted(directory.glob(f"trial-{number}-seed*")):
        try:
            remove_run(path)  # also what a process killed as it took the directory left there
        except RlfError:  # a run of someone else's, or one in training: left where it is
            pass


class ReportToTrial(Callback):
    """Every evaluation during training goes to the Optuna trial; when its pruner says so, the run stops
    (as ``run.stop_at`` would: the final checkpoint is written and ``on_end`` runs)."""

    def __init__(self, trial, metric: str, offset: int):
        self.trial, self.metric, self.offset = trial, metric, offset
        self.pruned_at: int | None = None

    def on_eval(self, trainer, metrics: dict[str, float]) -> None:
        if self.metric not in metrics:
            shown = ", ".join(sorted(k for k in metrics if k != "env_step"))
            raise UnknownMetric(f"--metric {self.metric!r} is not in the evaluation results ({shown}); name one "
                                "of them")
        value = float(metrics[self.metric])
        if not math.isfinite(value):
            return
        step = self.offset + int(metrics["env_step"])  # seeds one after another on one axis: steps compare
        self.trial.report(value, step)
        if self.pruned_at is None and self.trial.should_prune():
            self.pruned_at = int(metrics["env_step"])
            trainer.request_stop(f"pruned by Optuna at env step {self.pruned_at} ({self.metric} = {value:.4g})")


class UnknownMetric(ConfigError):
    """Not the trial's fault: the whole study stops."""


def objective(trial, plan: Plan, registry=None) -> float:
    import optuna

    from rlf.api import Algorithm
    from rlf.errors import EnvWorkerError, NonFiniteError, PluginRunError

    params = sample(trial, plan.space)
    trial.set_user_attr("host", socket.gethostname())
    trial.set_user_attr("pid", os.getpid())  # last: a trial with a pid has its settings (recover reads both)
    options = plan.options
    values = []
    for index, seed in enumerate(plan.seeds):
        run_dir = options.directory / f"trial-{trial.number}-seed{seed}"
        report = ReportToTrial(trial, options.metric, index * plan.steps)
        try:
            resolved = plan.resolve(params, f"seed={seed}", f"run_dir={json.dumps(str(run_dir))}", "progress=false",
                                    registry=registry)
            algo = Algorithm(resolved, registry=registry)
            summary = algo.train(callbacks=[report])
        except UnknownMetric:
            raise
        except (ConfigError, NonFiniteError, EnvWorkerError, PluginRunError) as exc:
            # these settings cannot train (a combination the algorithm refuses, a diverging run): this trial fails
            trial.set_user_attr("error", str(exc))
            return float("nan")
        if report.pruned_at is not None:
            trial.set_user_attr("pruned_at", {"seed": seed, "env_step": report.pruned_at})
            if not options.keep_pruned:
                _remove_dirs(options.directory, trial.number)
            raise optuna.TrialPruned()
        value = summary.get(f"eval/{options.metric}")
        if value is None:
            raise UnknownMetric(f"--metric {options.metric!r} is not in the final evaluation; name one of "
                                + ", ".join(sorted(k.removeprefix("eval/") for k in summary if k.startswith("eval/"))))
        values.append(float(value))
        trial.set_user_attr(f"seed{seed}", float(value))
    return float(sum(values) / len(values))


def _line(trial, metric: str) -> str:
    state = trial.state.name.lower()
    started, ended = trial.datetime_start, trial.datetime_complete
    elapsed = f"{(ended - started).total_seconds():.1f} s" if started and ended else "-"
    value = f"{metric} {trial.value:.4g}" if trial.value is not None else ""
    if trial.state.name == "PRUNED":
        at = trial.user_attrs.get("pruned_at", {})
        value = f"at env step {at.get('env_step')} (seed {at.get('seed')})" if at else ""
    elif trial.state.name == "FAIL":
        value = trial.user_attrs.get("error", "its process stopped")
    params = " ".join(f"{k}={_show(v)}" for k, v in trial.params.items())
    return f"trial {trial.number:<4} {state:<8} {value}  {params}  ({elapsed})"


def _show(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def work(options: TuneOptions, worker: int = 0, registry=None, plan_: Plan | None = None,
         first_started: Callable[[], None] | None = None, report: bool = True) -> None:
    """One worker: trials one after another until the study holds ``options.trials`` of them.
    ``first_started`` is called once, when this worker's first trial is in the study (RUNNING) and before
    it runs: workers that wait there for each other each hold a trial before any can take a second."""
    checked = plan_ or plan(options, registry)
    study = _open_study(options, worker)
    parent = os.getppid()
    waiting = [first_started] if first_started is not None else []

    def finished(study, trial) -> None:
        if report and not _surplus(trial):
            print(_line(trial, options.metric), flush=True)

    def run_trial(trial) -> float:
        if waiting:
            waiting.pop()()
        # the count checked below and the trial Optuna then creates are not one step: two workers that finish
        # together may both start one. The trials beyond --trials, by number, end at once (unrun, unlisted)
        numbers = sorted(t.number for t in study.get_trials(deepcopy=False) if _is_counted(t))
        if trial.number not in numbers[:options.trials]:
            trial.set_user_attr("surplus", True)
            return float("nan")
        return objective(trial, checked, registry)

    while _counted(study.get_trials(deepcopy=False)) < options.trials:
        if worker and os.getppid() != parent:  # the rlf tune that started this process is gone
            return
        study.optimize(run_trial, n_trials=1, callbacks=[finished], gc_after_trial=False)


def _worker_main(options: TuneOptions, worker: int, start) -> None:
    """A worker process (spawned: a fresh interpreter, its own generators and plugins)."""
    import threading

    def all_started() -> None:
        try:  # the first trials are spread over the processes, one each, whatever the machine's load
            start.wait(timeout=300)
        except threading.BrokenBarrierError:
            pass

    try:
        work(options, worker, plan_=plan(options), first_started=all_started)
    except RlfError as exc:
        text = " ".join(str(exc).split())
        print(f"rlf: error: {text}", file=sys.stderr, flush=True)
        sys.exit(getattr(exc, "exit_code", 2))
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        from rlf.training.trainer import Interrupted

        if isinstance(exc, Interrupted):
            sys.exit(130)
        raise


class WorkerFailed(RlfError):
    exit_code = 1


def run(options: TuneOptions, registry=None, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The search: checks everything, opens (or continues) the study, runs the trials in ``options.jobs``
    processes (in this one for a single job), then prints the results and writes ``best.toml``.
    Returns ``{"study", "best_value", "best_params", "best_file", "trials"}``."""
    say = say or (lambda line: print(line, flush=True))
    launcher = _launcher(options, registry)  # an unknown one is refused before anything else
    checked = plan(options, registry)
    if launcher is not None:
        if not options.directory.is_absolute():  # the same directory (and study.db) seen from every worker
            options = dataclasses.replace(options, study_dir=options.directory.resolve())
            checked = dataclasses.replace(checked, options=options)
        if launcher.check is not None:
            launcher.check(TuneJob(options, options.jobs, checked))
    elif options.address is not None:
        raise ConfigError(f"--address {options.address!r} is the address of a launcher's cluster; add --launcher "
                          "ray (pip install rlf-plugin-ray), or drop --address to run the workers as processes here")
    directory = options.directory
    directory.mkdir(parents=True, exist_ok=True)
    study = _open_study(options, create=True)
    if not study.trials and any(directory.glob("trial-*-seed*")):
        raise ConfigError(f"{directory} holds trial directories of another study (the study {options.study_name!r} "
                          f"in {options.storage_url} has no trials); choose another --study-dir or remove them")
    recover(study, options, say)
    done = _counted(study.get_trials(deepcopy=False))
    say(f"study {options.study_name!r} in {options.storage_url}: {done} of {options.trials} trials done; "
        f"{options.sampler} sampler, {options.pruner} pruner, "
        + (f"{options.jobs} process(es), " if launcher is None else
           f"{options.jobs} worker(s) on launcher {launcher.name} ({options.address or 'its default address'}), ")
        + f"{len(checked.seeds)} seed(s) x {checked.steps:,} env steps per trial, evaluated every "
        f"{checked.eval_interval:,}; trials in {directory}")
    # no more processes than trials left to run (queued retries among them): each process takes one
    # trial before any takes a second
    processes = min(options.jobs, max(options.trials - done, 1))
    if launcher is not None:
        job = TuneJob(options, processes, checked,
                      _shown={t.number for t in study.get_trials(deepcopy=False) if t.state.is_finished()})
        launcher.launch(job)
        job.poll(final=True)
    elif processes == 1:
        work(options, 0, registry, checked)
    else:
        _run_workers(options, processes)
    return finish(options, checked, say, registry)


def _run_workers(options: TuneOptions, processes: int) -> None:
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # never fork a process that may hold threads and locks
    start = context.Barrier(processes)
    workers = [context.Process(target=_worker_main, args=(options, index, start), name=f"rlf-tune-{index}")
               for index in range(processes)]
    for process in workers:
        process.start()
    try:
        while any(process.is_alive() for process in workers):
            for process in workers:
                process.join(timeout=0.5)
                if process.exitcode not in (None, 0):
                    raise WorkerFailed(f"worker process {process.pid} stopped with exit code {process.exitcode} "
                                       "(its error is above); the study is kept: run the same command to resume")
    except BaseException:
        for process in workers:
            process.join(timeout=30)  # Ctrl-C reached them too: their runs checkpoint and stop
            if process.is_alive():
                process.terminate()
                process.join()
        raise


def _launcher(options: TuneOptions, registry=None):
    """The launcher ``--launcher`` names (None: the core's worker processes); an unknown one: one line."""
    if options.launcher == "processes":
        return None
    if registry is None:
        from rlf.plugins import registry as loaded

        registry = loaded()
    return registry.launcher(options.launcher)


@dataclasses.dataclass
class TuneJob:
    """What a tune launcher (``rlf_register_tune_launchers``) runs: ``workers`` copies of the worker loop,
    each ``run_worker(index)`` wherever the launcher places it. Picklable (``options`` and the checked
    ``plan``: a worker reads no file of this machine's but the study's storage and the plugins' own)."""

    options: TuneOptions
    workers: int
    plan: Plan
    _shown: set[int] = dataclasses.field(default_factory=set, repr=False)

    @property
    def address(self) -> str | None:
        """``--address`` as given (None: the launcher's default, e.g. $RAY_ADDRESS)."""
        return self.options.address

    @property
    def storage_url(self) -> str:
        return self.options.storage_url

    @property
    def default_storage(self) -> bool:
        """The study is the SQLite file under --study-dir (or another SQLite URL): one machine's file."""
        return self.options.storage_url.startswith("sqlite")

    def run_worker(self, index: int) -> None:
        """One worker loop, in this process: trials until the study holds ``--trials`` of them (the
        trials' lines are printed by ``poll`` where rlf tune runs). Errors raise (``rlf.ConfigError``
        for one that stops the study)."""
        work(self.options, index, plan_=self.plan, report=False)

    def poll(self, final: bool = False) -> None:
        """Prints the line of every trial that finished since the last call, as the local workers do."""
        import optuna

        _quiet_optuna()
        study = optuna.load_study(study_name=self.options.study_name, storage=_storage(self.options))
        for trial in study.get_trials(deepcopy=False):
            if trial.number in self._shown or not trial.state.is_finished() or _surplus(trial):
                continue
            if not final and trial.state.name == "FAIL" and "error" not in trial.user_attrs:
                continue  # maybe lost, maybe about to be written: shown at the end
            self._shown.add(trial.number)
            print(_line(trial, self.options.metric), flush=True)


def finish(options: TuneOptions, checked: Plan, say: Callable[[str], None], registry=None) -> dict[str, Any]:
    import optuna

    study = optuna.load_study(study_name=options.study_name, storage=_storage(options))
    trials = [t for t in study.get_trials(deepcopy=False) if not _surplus(t)]
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    sign = -1 if options.direction == "maximize" else 1
    order = {"COMPLETE": 0, "PRUNED": 1, "RUNNING": 2, "FAIL": 3}
    ranked = sorted(trials, key=lambda t: (order.get(t.state.name, 4),
                                           sign * t.value if t.value is not None else 0, t.number))
    keys = list(dict.fromkeys(k for t in trials for k in t.params))
    header = ["trial", "state", options.metric, *keys, "seconds"]
    rows = [[str(t.number), t.state.name.lower(), _show(t.value) if t.value is not None else "-",
             *(_show(t.params[k]) if k in t.params else "-" for k in keys),
             f"{(t.datetime_complete - t.datetime_start).total_seconds():.1f}"
             if t.datetime_complete and t.datetime_start else "-"] for t in ranked]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    say("")
    for row in [header, *rows]:
        say("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    counts = {state: sum(1 for t in trials if t.state.name == state) for state in ("COMPLETE", "PRUNED", "FAIL")}
    say(f"{counts['COMPLETE']} complete, {counts['PRUNED']} pruned, {counts['FAIL']} failed")
    result: dict[str, Any] = {"study": study, "trials": trials, "best_value": None, "best_params": None,
                              "best_file": None}
    if not complete:
        say("no trial completed, so there are no best settings yet; see the failed trials' errors above")
        return result
    best = study.best_trial
    params = decode(checked.space, best.params)
    path = options.directory / BEST_FILE
    write_best(path, checked, params, best, registry)
    say(f"best: trial {best.number}, {options.metric} {best.value:.4g}; its settings are in {path}: "
        f"rlf train {options.algorithm}{f' --env {options.env}' if options.env else ''} --config {path}")
    result.update(best_value=best.value, best_params=params, best_file=path)
    return result


# -- best.toml --------------------------------------------------------------------------------------


def write_best(path: Path, checked: Plan, params: Mapping[str, Any], trial, registry=None) -> None:
    """The fixed settings with the best params as full tables: what ``rlf train --config`` takes (a config
    file replaces the plugin's preset, so everything the preset set is written out)."""
    resolved = checked.resolve(params, registry=registry)
    tables = resolved.as_dict()
    tables["run"].pop("run_dir", None)
    options = checked.options
    head = [f"# rlf tune: the best of study {options.study_name!r} ({options.storage_url}): trial {trial.number}, "
            f"{options.metric} {trial.value:.6g} (mean over {options.seeds} seed(s))",
            "# searched: " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in params.items()),
            f"# train with: rlf train {options.algorithm} --env {resolved.run.env} --config {path.name}", ""]
    text = "\n".join(head) + dump_toml(tables)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


_BARE = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE.fullmatch(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ConfigError(f"cannot write {value!r} ({type(value).__name__}) to TOML")


def dump_toml(tables: Mapping[str, Any], prefix: str = "") -> str:
    """Nested tables as TOML (None, which TOML cannot say, is left out: the setting keeps its default)."""
    out = []
    for name, table in tables.items():
        if not isinstance(table, Mapping) or not table:
            continue
        full = f"{prefix}{_toml_key(name)}"
        scalars = {k: v for k, v in table.items() if v is not None and not isinstance(v, Mapping)}
        subtables = {k: v for k, v in table.items() if isinstance(v, Mapping)}
        if scalars or not subtables:
            out.append(f"[{full}]")
            out += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in scalars.items()]
            out.append("")
        if subtables:
            out.append(dump_toml(subtables, f"{full}."))
    return "\n".join(out)


__all__ = ["Param", "TuneJob", "TuneOptions", "load_space", "parse_space", "plan", "run"]

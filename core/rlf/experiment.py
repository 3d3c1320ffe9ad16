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
    eval_modes = ["greedy", "stochastic"]  # greedy (default) and/or acting as in training

    [run]  / [algo] / [env]       # shared by every run, as in `rlf train --config`

    [settings.game]               # each setting adds its own run/algo/env tables
    [settings.sparse.env]
    extrinsic_reward = "flag"

    [algorithms.ppo]              # in the order they should run; each may add
    seeds = [0, 1]                #   seeds, settings = [...] (a subset), config = "file.toml"
    steps = 1_000_000             #   (relative to this file), its own budget (steps = N, or a table
                                  #   {setting = N}) and its own
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
import json
import signal
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import SECTIONS, load_toml, merge, parse_overrides
from .errors import ConfigError

EXPERIMENT_KEYS = {"env", "steps", "seeds", "runs_dir", "metrics", "last", "eval_episodes", "eval_modes", "plot_metric",
                   "smooth", "description"}
ALGORITHM_KEYS = {"seeds", "settings", "config", "steps", *SECTIONS}
FINAL_EVAL_FILES = {"greedy": "final_eval.csv", "stochastic": "final_eval_stochastic.csv"}  # results.SOURCES
FINAL_EVAL_SOURCES = {"greedy": "final", "stochastic": "final-stochastic"}
DONE_FILE = "experiment.json"


@dataclass
class PlannedRun:
    name: str                              # <setting>/<algorithm>-seed<N>
    setting: str
    algorithm: str
    seed: int
    config: dict[str, dict[str, Any]]
    path: Path
    steps: int                             # this run's budget in env steps


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
    plot_metric: str
    smooth: int
    runs: list[PlannedRun]


def _table(data: dict, key: str, where: str) -> dict:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: [{key}] must be a table")
    return value


def _unknown(found: Sequence[str], allowed: set[str], where: str) -> None:
    extra = sorted(set(found) - allowed)
    if extra:
        raise ConfigError(f"{where}: unknown key(s) {extra}; allowed: {', '.join(sorted(allowed))}")


def load_experiment(path: Path, *, steps: int | None = None, seeds: Sequence[int] | None = None,
                    eval_episodes: int | None = None,
                    runs_dir: Path | None = None, only: Sequence[str] = (), overrides: Sequence[str] = ()
                    ) -> Experiment:
    """Parse and expand an experiment file into its runs (validated later, when each is built)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"experiment file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"experiment file {path} is not valid TOML ({exc}); fix the syntax and retry") from None
    where = f"experiment file {path}"
    _unknown(list(data), {"experiment", "settings", "algorithms", *SECTIONS}, where)
    head = _table(data, "experiment", where)
    _unknown(list(head), EXPERIMENT_KEYS, f"{where} [experiment]")
    if "env" not in head:
        raise ConfigError(f'{where}: [experiment] needs env = "..." (one environment for every run)')
    budget = _budget(steps if steps is not None else head.get("steps", 100_000), "--steps or [experiment] steps")
    default_seeds = list(seeds if seeds is not None else head.get("seeds", [0]))
    shared = {section: dict(_table(data, section, where)) for section in SECTIONS}
    settings = _table(data, "settings", where) or {"default": {}}
    algorithms = _table(data, "algorithms", where)
    if not algorithms:
        raise ConfigError(f"{where}: no [algorithms.<name>] tables; add one per algorithm to train")
    extra = parse_overrides(overrides)
    out_dir = Path(runs_dir if runs_dir is not None else head.get("runs_dir", f"runs/{path.stem}"))
    planned: list[PlannedRun] = []
    for setting, setting_tables in settings.items():
        if not isinstance(setting_tables, dict):
            raise ConfigError(f"{where}: [settings.{setting}] must be a table")
        _unknown(list(setting_tables), set(SECTIONS), f"{where} [settings.{setting}]")
        for algorithm, spec in algorithms.items():
            if not isinstance(spec, dict):
                raise ConfigError(f"{where}: [algorithms.{algorithm}] must be a table")
            _unknown(list(spec), ALGORITHM_KEYS, f"{where} [algorithms.{algorithm}]")
            wanted = spec.get("settings")
            if wanted is not None:
                missing = sorted(set(wanted) - set(settings))
                if missing:
                    raise ConfigError(f"{where} [algorithms.{algorithm}]: unknown setting(s) {missing}; "
                                      f"defined: {', '.join(settings)}")
                if setting not in wanted:
                    continue
            config: dict[str, Any] = {section: {} for section in SECTIONS}
            config = merge(config, shared)
            if "config" in spec:
                config = merge(config, load_toml(path.parent / spec["config"]))
            config = merge(config, {s: spec.get(s, {}) for s in SECTIONS})
            config = merge(config, {s: setting_tables.get(s, {}) for s in SECTIONS})
            config = merge(config, extra)
            algo_seeds = list(seeds) if seeds is not None else list(spec.get("seeds", default_seeds))
            # --steps on the command line wins over every file budget (a quick trial of the whole file)
            run_budget = budget if steps is not None else _algorithm_budget(spec, algorithm, setting, budget)
            for seed in algo_seeds:
                name = f"{setting}/{algorithm}-seed{seed}"
                run_config = merge(config, {"run": {"steps": run_budget, "seed": int(seed)}})
                planned.append(PlannedRun(name, setting, algorithm, int(seed), run_config, out_dir / name,
                                          run_budget))
    if only:
        planned = [run for run in planned if any(fnmatch.fnmatchcase(run.name, p) for p in only)]
        if not planned:
            raise ConfigError(f"--only {' '.join(only)} matches none of this experiment's runs "
                              "(names are <setting>/<algorithm>-seed<N>; see --dry-run)")
    metrics = list(head.get("metrics", ["return"]))
    modes = head.get("eval_modes", ["greedy"])
    if not isinstance(modes, list) or not modes or any(m not in FINAL_EVAL_FILES for m in modes):
        raise ConfigError(f"{where} [experiment] eval_modes = {modes!r}: give a non-empty list of "
                          f"{' and/or '.join(map(repr, FINAL_EVAL_FILES))}")
    return Experiment(path, str(head["env"]), budget, out_dir, metrics, int(head.get("last", 100)),
                      int(eval_episodes if eval_episodes is not None else head.get("eval_episodes", 0)),
                      list(dict.fromkeys(modes)),
                      str(head.get("plot_metric", metrics[0])),
                      int(head.get("smooth", 10)), planned)


def _budget(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} = {value!r}: the budget must be a whole number of env steps, at least 1")
    return value


def _algorithm_budget(spec: dict, algorithm: str, setting: str, default: int) -> int:
    """``steps = N`` for every setting, or ``steps = {game = N, none = M}`` (a setting left out: the default)."""
    value = spec.get("steps", default)
    if isinstance(value, dict):
        return _budget(value.get(setting, default), f"[algorithms.{algorithm}] steps.{setting}")
    return _budget(value, f"[algorithms.{algorithm}] steps")


def _done_steps(run: PlannedRun) -> int | None:
    """Env steps a finished run reached (None: not finished)."""
    marker = run.path / DONE_FILE
    if not marker.is_file():
        return None
    try:
        return int(json.loads(marker.read_text())["env_steps"])
    except (ValueError, KeyError, TypeError):
        return None


def _sigterm_as_interrupt(signum, frame):  # a `kill` saves a checkpoint like Ctrl-C does
    raise KeyboardInterrupt


def train_one(run: PlannedRun, env: str, log: Callable[[str], None], registry=None) -> str:
    """Train (or resume, or skip) one run to its budget; returns what happened."""
    from . import api
    from .api import CHECKPOINT_FILE

    steps = run.steps
    done = _done_steps(run)
    if done is not None and done >= steps:
        return "done"
    if (run.path / CHECKPOINT_FILE).is_file():
        algo = api.load(run.path, overrides=["run.progress=false"], registry=registry)
        at = algo.counters.get("env_steps", 0)
        if at >= steps:
            _mark_done(run, at)
            return "done"
        log(f"{run.name}: resuming at env step {at} of {steps}")
        action = "resumed"
    else:
        if run.path.exists() and any(run.path.iterdir()):
            # hidden, so `rlf compare <runs_dir>` does not count it as another seed
            aside = run.path.with_name(f".{run.path.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
            run.path.rename(aside)
            log(f"{run.name}: no checkpoint in the old directory; moved it to {aside} and starting over")
        config = merge(run.config, {"run": {"run_dir": str(run.path), "progress": False}})
        algo = api.make(run.algorithm, env, config=config, registry=registry)
        log(f"{run.name}: training {steps} env steps")
        action = "trained"
    start = time.perf_counter()
    summary = algo.train(steps=steps)
    _mark_done(run, int(algo.counters.get("env_steps", steps)))
    shown = {k: round(v, 3) for k, v in summary.items() if k.startswith("mean_")}
    log(f"{run.name}: finished in {time.perf_counter() - start:.0f} s {json.dumps(shown)}")
    return action


def _mark_done(run: PlannedRun, env_steps: int) -> None:
    from .checkpoint import atomic_write
    from .rundir import claim

    record = json.dumps({"env_steps": env_steps, "finished_at": time.time()}).encode()
    atomic_write(claim(run.path, DONE_FILE), lambda handle: handle.write(record))


def _evaluated_since_done(run: PlannedRun, target) -> bool:
    # A run continued to a bigger budget is marked done again: an evaluation older than that mark is
    # of an earlier checkpoint and is redone rather than published beside the new training figures.
    try:
        return target.stat().st_mtime_ns >= (run.path / DONE_FILE).stat().st_mtime_ns
    except FileNotFoundError:
        return False


def evaluate_one(run: PlannedRun, episodes: int, log: Callable[[str], None], registry=None,
                 mode: str = "greedy") -> bool:
    """Evaluation episodes of a finished run (``mode`` greedy or stochastic), one row each in
    final_eval.csv / final_eval_stochastic.csv (once)."""
    from . import api
    from .rundir import claim, rewrite_csv

    target = run.path / FINAL_EVAL_FILES[mode]
    if episodes < 1 or _done_steps(run) is None or _evaluated_since_done(run, target):
        return False
    algo = api.load(run.path, registry=registry)
    algo.evaluate(episodes=episodes, stochastic=mode == "stochastic")
    rows = algo.last_evaluation
    columns = sorted({k for row in rows for k in row})
    rewrite_csv(claim(run.path, target.name), columns, rows)
    log(f"{run.name}: {len(rows)} {mode} evaluation episodes -> {target}")
    return True


def run_experiment(experiment: Experiment, *, train: bool = True, report: bool = True,
                   log: Callable[[str], None] = print, registry=None) -> dict[str, str]:
    """Train, evaluate and report; returns each run's outcome (done, trained, resumed, busy, failed)."""
    from filelock import FileLock, Timeout

    from .training.trainer import Interrupted

    outcomes: dict[str, str] = {}
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        for phase in ("train", "eval") if train else ():
            for run in experiment.runs:
                run.path.parent.mkdir(parents=True, exist_ok=True)
                lock = FileLock(str(run.path) + ".lock")
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    outcomes.setdefault(run.name, "busy")
                    log(f"{run.name}: another process holds {lock.lock_file}; leaving it to that one")
                    continue
                try:
                    if phase == "train":
                        outcomes[run.name] = train_one(run, experiment.env, log, registry)
                    else:
                        for mode in experiment.eval_modes:
                            evaluate_one(run, experiment.eval_episodes, log, registry, mode)
                except (KeyboardInterrupt, Interrupted):
                    log(f"{run.name}: interrupted; the checkpoint is saved, rerun the same command to resume")
                    raise KeyboardInterrupt from None
                except Exception as exc:  # one broken run must not cost the others; say which and why
                    outcomes[run.name] = "failed"
                    log(f"{run.name}: FAILED {type(exc).__name__}: {exc}")
                finally:
                    lock.release()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if report:
        write_report(experiment, log)
    return outcomes


def write_report(experiment: Experiment, log: Callable[[str], None] = print) -> list[Path]:
    """compare.md / compare.csv (training episodes and, where present, the evaluations after training) and
    curves.png (when matplotlib is installed) in the runs directory, from whatever runs exist."""
    from .results import ResultsError, compare, find_runs, format_table

    paths = [run.path for run in experiment.runs if (run.path / "run.json").is_file()]
    if not paths:
        log("report: no runs yet")
        return []
    runs = find_runs(paths)
    written = []
    sections = [f"# {experiment.path.stem}\n",
                f"Budget {_budgets(experiment)} env steps per run; runs in {experiment.runs_dir}.\n",
                f"## Last {experiment.last} training episodes (all of them where a run has fewer)\n",
                format_table(compare(runs, experiment.metrics, "train", experiment.last), experiment.metrics)]
    for mode, name in FINAL_EVAL_FILES.items():
        evaluated = [r for r in runs if (r.path / name).is_file()]
        if evaluated:
            sections += [f"\n## {mode.capitalize()} evaluation after training ({experiment.eval_episodes} "
                         "episodes per run)\n",
                         format_table(compare(evaluated, experiment.metrics, FINAL_EVAL_SOURCES[mode], 10**9),
                                      experiment.metrics)]
    table = experiment.runs_dir / "compare.md"
    table.write_text("\n".join(sections))
    csv_path = experiment.runs_dir / "compare.csv"
    csv_path.write_text(format_table(compare(runs, experiment.metrics, "train", experiment.last),
                                     experiment.metrics, "csv"))
    written += [table, csv_path]
    try:
        from .plotting import plot_runs

        png = experiment.runs_dir / "curves.png"
        plot_runs(runs, png, metric=experiment.plot_metric, smooth=experiment.smooth,
                  title=f"{experiment.path.stem}: {experiment.plot_metric}")
        written.append(png)
    except ResultsError as exc:  # matplotlib missing: the table is still worth having
        log(f"report: no plot ({exc})")
    log("report: " + ", ".join(map(str, written)))
    return written


def _budgets(experiment: Experiment) -> str:
    per_algorithm = {run.algorithm: run.steps for run in experiment.runs}
    if len(set(per_algorithm.values())) <= 1:
        return str(next(iter(per_algorithm.values()), experiment.steps))
    return ", ".join(f"{name} {steps}" for name, steps in per_algorithm.items())


def main(args) -> int:
    experiment = load_experiment(args.file, steps=args.steps, seeds=args.seeds, eval_episodes=args.eval_episodes,
                                 runs_dir=args.runs_dir,
                                 only=args.only, overrides=args.overrides)
    if args.dry_run:
        for run in experiment.runs:
            done = _done_steps(run)
            state = "done" if done is not None and done >= run.steps else (
                "partial" if run.path.exists() else "to do")
            print(f"{run.name:<32} {state:<8} {run.steps:>10} {run.path}")
        return 0

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    outcomes = run_experiment(experiment, train=not args.report_only, log=log)
    failed = [name for name, outcome in outcomes.items() if outcome == "failed"]
    return 1 if failed else 0

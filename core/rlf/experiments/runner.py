"""Running an experiment (``rlf experiment FILE``): every planned run resolved before any trains, each
trained or resumed under its lock, evaluated once at its budget, then the comparison table written.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlf.config import merge
from rlf.errors import ConfigError
from rlf.experiments.spec import (
    CHECKS_FILE,
    DONE_FILE,
    FINAL_EVAL_FILES,
    FINAL_EVAL_SOURCES,
    FIXED_START_EPISODES,
    Experiment,
    PlannedRun,
    load_experiment,
)
from rlf.logging.callbacks import Callback
from rlf.storage import files, rundir


def check_runs(experiment: Experiment, registry=None) -> None:
    """Resolve every run (algorithm, environment, settings, ``--set``) and check where it goes, before
    the first one trains: a mistake in the last run must not be found after hours of the others."""
    from rlf.api import check_resolved
    from rlf.envs.base import EnvFactory
    from rlf.errors import RlfError
    from rlf.resolution import resolve

    probed: dict[str, Any] = {}  # one env built per distinct env config (a Mario emulator takes seconds)
    for run in experiment.runs:
        try:
            config = merge(run.config, {"run": {"run_dir": str(run.path), "progress": False}})
            resolved = resolve(run.algorithm, experiment.env, config=config, registry=registry)
            key = json.dumps([resolved.run.env, resolved.run.num_envs, resolved.env.model_dump(mode="json")],
                             sort_keys=True, default=str)
            if key not in probed:
                factory = EnvFactory(resolved.environment.build_env, resolved.env)
                probed[key] = factory.describe(resolved.run.env, resolved.run.num_envs)
            check_resolved(resolved, probed[key])
            _check_place(run)
        except RlfError as exc:
            raise ConfigError(f"run {run.name}: {exc}; nothing was trained") from None


def _check_place(run: PlannedRun) -> None:
    rundir.validate(run.path)
    for path in (run.path.parent, run.path):
        if path.is_symlink():
            raise ConfigError(f"{path} is a symbolic link; rlf experiment writes its runs only inside the runs "
                              "directory: remove the link or choose another runs_dir")
    if run.path.is_dir() and not _ours(run.path):
        raise ConfigError(f"{run.path} already exists and holds files rlf did not write; rlf never moves or "
                          "writes into a directory it did not create: move it away or choose another runs_dir")


def _ours(path: Path) -> bool:
    """An empty directory, or one a run of rlf created (its record of files, or a run.json of rlf's)."""
    from rlf.api import RUN_FILE

    try:
        empty = not any(path.iterdir())
    except OSError:
        return False
    return empty or (path / files.MANIFEST_FILE).is_file() or RUN_FILE in files.owned_files(path)


def _done_record(run: PlannedRun) -> dict[str, Any] | None:
    """What the finished-run marker says (None: not finished)."""
    marker = run.path / DONE_FILE
    if not marker.is_file():
        return None
    try:
        record = json.loads(marker.read_text())
        record["env_steps"] = int(record["env_steps"])
    except (ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None


def _done_steps(run: PlannedRun) -> int | None:
    """Env steps a finished run reached (None: not finished)."""
    record = _done_record(run)
    return None if record is None else record["env_steps"]


def _finished(run: PlannedRun, record: dict[str, Any] | None = None) -> bool:
    """Trained to its budget, or stopped at its ``until`` target (``record``: the marker, if already read)."""
    record = record or _done_record(run)
    return record is not None and (record["env_steps"] >= run.steps or bool(record.get("until")))


def train_one(run: PlannedRun, env: str, log: Callable[[str], None], registry=None) -> str:
    """Train (or resume, or skip) one run to its budget, or to its ``until`` target; returns what happened."""
    from rlf import api, saved
    from rlf.api import CHECKPOINT_FILE

    steps = run.steps
    if _finished(run):
        return "done"
    action = "done"
    while True:  # one pass per `until` check; a single pass without a target
        if (run.path / CHECKPOINT_FILE).is_file():
            algo = saved.load(run.path, overrides=["run.progress=false"], registry=registry)
            at = algo.counters.get("env_steps", 0)
            if at >= steps:
                _mark_done(run, at)
                return action
            reached = _check_target(run, algo, at, log) if run.until is not None and at > 0 else None
            if reached is not None:
                _mark_done(run, at, until=reached)
                return action
            if action == "done":
                log(f"{run.name}: resuming at env step {at} of {steps}")
                action = "resumed"
        else:
            if run.path.exists() and any(run.path.iterdir()):
                if not _ours(run.path):  # checked before training began; it may have appeared since
                    _check_place(run)
                # hidden, so `rlf compare <runs_dir>` does not count it as another seed
                aside = run.path.with_name(f".{run.path.name}.incomplete-{time.strftime('%Y%m%d-%H%M%S')}")
                run.path.rename(aside)
                log(f"{run.name}: no checkpoint in the old directory; moved it to {aside} and starting over")
            config = merge(run.config, {"run": {"run_dir": str(run.path), "progress": False}})
            algo = api.make(run.algorithm, env, config=config, registry=registry)
            at = 0
            log(f"{run.name}: training {steps} env steps")
            action = "trained"
        stop = steps if run.until is None else min(steps, (at // run.until.every + 1) * run.until.every)
        start = time.perf_counter()
        summary = algo.train(steps=stop, callbacks=[_StartRecord(run)])
        reached_at = int(algo.counters.get("env_steps", stop))
        if run.until is None or reached_at >= steps or algo.stop_reason is not None:
            _mark_done(run, reached_at)
            shown = {k: round(v, 3) for k, v in summary.items() if k.startswith("mean_")}
            log(f"{run.name}: finished in {time.perf_counter() - start:.0f} s {json.dumps(shown)}")
            return action


def _check_target(run: PlannedRun, algo, at: int, log: Callable[[str], None]) -> dict[str, Any] | None:
    """The ``until`` check of ``algo``, the checkpoint at ``at`` freshly loaded: the record for the marker if
    reached, else None. It evaluates exactly as the final evaluation of its mode does (the default seed)."""
    until = run.until
    result = algo.evaluate(episodes=until.episodes, stochastic=until.mode == "stochastic")
    score = result.get(until.metric)
    if score is None:
        raise ConfigError(f"until.metric {until.metric!r} is not among the evaluation's results "
                          f"({', '.join(sorted(result))}); name one of them")
    reached = score >= until.value
    _record_check(run, at, float(score), reached)
    log(f"{run.name}: {until.mode} evaluation at env step {at} ({until.episodes} episodes): "
        f"{until.metric} = {score:.4g}, target {until.value:g}: {'reached, the run ends here' if reached else 'not yet'}")
    return {"metric": until.metric, "value": score, "target": until.value, "mode": until.mode,
            "episodes": until.episodes} if reached else None


def _record_check(run: PlannedRun, at: int, score: float, reached: bool) -> None:
    """One row per ``until`` check in the run's checks.csv: how close each check came, not only the last."""
    from rlf.storage.checkpoint import atomic_write
    from rlf.storage.files import claim

    path = claim(run.path, CHECKS_FILE)
    until = run.until
    old = path.read_text() if path.is_file() else "env_step,metric,value,target,mode,episodes,reached,time\n"
    row = f"{at},{until.metric},{score:.6g},{until.value:g},{until.mode},{until.episodes},{int(reached)},{time.time():.0f}\n"
    atomic_write(path, lambda handle: handle.write((old + row).encode()))


def _started_at(run: PlannedRun) -> float | None:
    try:
        started = json.loads((run.path / DONE_FILE).read_text()).get("started_at")
    except (OSError, ValueError, AttributeError):
        return None
    return float(started) if isinstance(started, (int, float)) else None


def _write_marker(run: PlannedRun, data: dict[str, Any]) -> None:
    from rlf.storage.checkpoint import atomic_write
    from rlf.storage.files import claim

    record = json.dumps(data).encode()
    atomic_write(claim(run.path, DONE_FILE), lambda handle: handle.write(record))


class _StartRecord(Callback):
    """Puts the time a run first started training in its marker (experiment.json), once the run directory
    is its own: a protocol registered before the runs can be shown to be older than each of them."""

    def __init__(self, run: PlannedRun):
        self.run = run

    def on_start(self, trainer) -> None:
        if _started_at(self.run) is None:
            _write_marker(self.run, {"started_at": time.time()})


def _mark_done(run: PlannedRun, env_steps: int, until: dict[str, Any] | None = None) -> None:
    data: dict[str, Any] = {"env_steps": env_steps, "finished_at": time.time()}
    started = _started_at(run)
    if started is not None:
        data["started_at"] = started
    if until is not None:
        data["until"] = until
    _write_marker(run, data)


def _evaluated_since_done(run: PlannedRun, target) -> bool:
    # A run continued to a bigger budget is marked done again: an evaluation older than that mark is
    # of an earlier checkpoint and is redone rather than published beside the new training figures.
    try:
        return target.stat().st_mtime_ns >= (run.path / DONE_FILE).stat().st_mtime_ns
    except FileNotFoundError:
        return False


def evaluate_one(run: PlannedRun, episodes: int, log: Callable[[str], None], registry=None,
                 mode: str = "greedy", fixed_start: Sequence[str] = ()) -> bool:
    """Evaluation episodes of a finished run (``mode`` greedy, stochastic or fixed-start: greedy on an
    env made deterministic by the ``fixed_start`` overrides), one row each in the mode's file (once)."""
    from rlf import saved
    from rlf.storage.files import claim
    from rlf.storage.rundir import rewrite_csv

    target = run.path / FINAL_EVAL_FILES[mode]
    if episodes < 1 or _done_steps(run) is None or _evaluated_since_done(run, target):
        return False
    if mode == "fixed-start":
        algo = saved.load(run.path, registry=registry, overrides=fixed_start)
        episodes = FIXED_START_EPISODES
    else:
        algo = saved.load(run.path, registry=registry)
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

    from rlf.training.trainer import Interrupted, sigterm_as_interrupt

    if train:
        check_runs(experiment, registry)
    outcomes: dict[str, str] = {}
    with sigterm_as_interrupt():
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
                            evaluate_one(run, experiment.eval_episodes, log, registry, mode, experiment.fixed_start)
                except (KeyboardInterrupt, Interrupted):
                    log(f"{run.name}: interrupted; the checkpoint is saved, rerun the same command to resume")
                    raise KeyboardInterrupt from None
                except Exception as exc:  # one broken run must not cost the others; say which and why
                    outcomes[run.name] = "failed"
                    log(f"{run.name}: FAILED {type(exc).__name__}: {exc}")
                finally:
                    lock.release()
    if report:
        write_report(experiment, log)
    return outcomes


def write_report(experiment: Experiment, log: Callable[[str], None] = print) -> list[Path]:
    """compare.md / compare.csv (training episodes and, where present, the evaluations after training) and
    curves.png (when matplotlib is installed) in the runs directory, from whatever runs exist."""
    from rlf.experiments.results import ResultsError, compare, find_runs, format_table

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
            count = FIXED_START_EPISODES if mode == "fixed-start" else experiment.eval_episodes
            sections += [f"\n## {mode.capitalize()} evaluation after training ({count} episode(s) per run)\n",
                         format_table(compare(evaluated, experiment.metrics, FINAL_EVAL_SOURCES[mode], 10**9),
                                      experiment.metrics)]
    from rlf.storage.checkpoint import atomic_write

    table = experiment.runs_dir / "compare.md"
    atomic_write(table, lambda handle: handle.write("\n".join(sections).encode()))  # never through a link
    csv_path = experiment.runs_dir / "compare.csv"
    csv_text = format_table(compare(runs, experiment.metrics, "train", experiment.last), experiment.metrics, "csv")
    atomic_write(csv_path, lambda handle: handle.write(csv_text.encode()))
    written += [table, csv_path]
    try:
        from rlf.experiments.plotting import plot_runs

        png = experiment.runs_dir / "curves.png"
        plot_runs(runs, png, metric=experiment.plot_metric, smooth=experiment.smooth,
                  title=f"{experiment.path.stem}: {experiment.plot_metric}")
        written.append(png)
    except ResultsError as exc:  # matplotlib missing: the table is still worth having
        log(f"report: no plot ({exc})")
    log("report: " + ", ".join(map(str, written)))
    return written


def _budgets(experiment: Experiment) -> str:
    per_algorithm = {run.entry: run.steps for run in experiment.runs}
    if len(set(per_algorithm.values())) <= 1:
        return str(next(iter(per_algorithm.values()), experiment.steps))
    return ", ".join(f"{name} {steps}" for name, steps in per_algorithm.items())


def main(args) -> int:
    experiment = load_experiment(args.file, steps=args.steps, seeds=args.seeds, eval_episodes=args.eval_episodes,
                                 runs_dir=args.runs_dir,
                                 only=args.only, overrides=args.overrides)
    if args.dry_run:
        check_runs(experiment)
        for run in experiment.runs:
            record = _done_record(run)
            state = ("target" if record.get("until") else "done") if _finished(run, record) else (
                "partial" if run.path.exists() else "to do")
            print(f"{run.name:<32} {state:<8} {run.steps:>10} {run.path}")
        return 0

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    outcomes = run_experiment(experiment, train=not args.report_only, log=log)
    failed = [name for name, outcome in outcomes.items() if outcome == "failed"]
    return 1 if failed else 0

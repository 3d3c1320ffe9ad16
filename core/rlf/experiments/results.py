"""Reading finished (or running) run directories back: which runs a command names, their learning
curves, and the aggregate statistics of ``rlf compare``.

Final performance is reported as the field now asks for few runs (Agarwal et al. 2021, rliable): each run
gets one score (the mean of its last N episodes), and over a group's runs the mean, the median and the
interquartile mean are given with percentile bootstrap intervals over runs (``rlf.experiments.stats``),
beside the number of runs, and the probability that a run of one group beats a run of another. Those
intervals say how the algorithm may vary from seed to seed. Episode-level statistics (``level="episode"``:
every final episode of every run pooled, with a hierarchical bootstrap over runs and their episodes)
remain available and are labelled as such: they describe the runs at hand, not the algorithm.
"""

from __future__ import annotations

import csv
import glob
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlf.errors import RlfError
from rlf.experiments.stats import holm, improvement_estimate, interval_estimates, iqm, permutation_p_value

LEVELS = ("run", "episode")

RUN_FILE = "run.json"
EPISODES_FILE = "episodes.csv"
METRICS_FILE = "metrics.csv"
EVAL_FILE = "eval.csv"
FINAL_EVAL_FILE = "final_eval.csv"
FINAL_STOCHASTIC_FILE = "final_eval_stochastic.csv"
FINAL_FIXED_START_FILE = "final_eval_fixed_start.csv"
SOURCES = {"train": EPISODES_FILE, "eval": EVAL_FILE, "final": FINAL_EVAL_FILE,
           "final-stochastic": FINAL_STOCHASTIC_FILE, "final-fixed-start": FINAL_FIXED_START_FILE,
           "learner": METRICS_FILE}
"""Where a metric is read from: training episodes, the periodic evaluations logged during training,
the greedy / stochastic / fixed-start evaluation episodes `rlf experiment` runs after training (one
row per episode), or the learner's and agent's metrics of each log interval (losses, entropy, a curiosity
model's intrinsic reward: one row per interval, so "the last N" are intervals, not episodes)."""

# Config fields that say how a run was executed or logged, not what was learned: runs that differ only
# in these are seeds of the same configuration.
_NOT_A_SETTING = {"run.seed", "run.run_dir", "run.progress", "run.log_interval", "run.checkpoint_interval",
                  "run.device", "run.save_replay", "run.vector", "run.steps", "run.algorithm", "run.env"}


MAX_REPS = 100_000
"""Bootstrap replicates at most: the draw holds reps x runs x episodes numbers in memory at once."""


class ResultsError(RlfError):
    """The runs named on the command line cannot be compared or plotted as asked."""


@dataclass
class Run:
    """One run directory, read lazily."""

    path: Path
    config: dict[str, dict[str, Any]]

    @property
    def algorithm(self) -> str:
        return str(self.config["run"]["algorithm"])

    @property
    def env(self) -> str:
        return str(self.config["run"]["env"])

    @property
    def seed(self) -> int:
        return int(self.config["run"].get("seed", 0))

    def settings(self) -> dict[str, Any]:
        """Every config value that defines what was trained, flattened to ``section.key`` (nested dotted)."""
        flat: dict[str, Any] = {}
        for section, values in self.config.items():
            _flatten(flat, section, values)
        return {k: v for k, v in flat.items() if k not in _NOT_A_SETTING}

    def table(self, source: str) -> list[dict[str, float]]:
        path = self.path / SOURCES[source]
        if not path.is_file():
            if source == "eval":
                raise ResultsError(f"run {self.path} has no {EVAL_FILE} (it was trained without periodic "
                                   "evaluation); use --source train")
            if source.startswith("final"):
                raise ResultsError(f"run {self.path} has no {SOURCES[source]} (written by `rlf experiment` "
                                   "after training); use --source train")
            return []
        return read_rows(path)

    def progress(self) -> tuple[np.ndarray, np.ndarray]:
        """(env steps, cumulative wall seconds) at every row of metrics.csv, starting at (0, 0).

        metrics.csv stores the env steps/s of each logging window; the window's length in seconds is
        its env steps over that rate. A ``wall_time`` column, where a logger writes one, is used directly.
        """
        rows = read_rows(self.path / METRICS_FILE) if (self.path / METRICS_FILE).is_file() else []
        steps, wall = [0.0], [0.0]
        for row in rows:
            step = row.get("env_step")
            if step is None or step <= steps[-1]:
                continue
            if "wall_time" in row:
                seconds = row["wall_time"]
            else:
                rate = row.get("steps_per_second", 0.0)
                seconds = wall[-1] + ((step - steps[-1]) / rate if rate > 0 else 0.0)
            steps.append(step)
            wall.append(seconds)
        return np.asarray(steps), np.asarray(wall)


def _flatten(out: dict[str, Any], prefix: str, value: Any) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flatten(out, f"{prefix}.{key}", item)
    else:
        out[prefix] = json.dumps(value, sort_keys=True) if isinstance(value, list) else value


def read_rows(path: Path) -> list[dict[str, float]]:
    """A CSV log as floats per row; empty and non-numeric cells (and a ragged row's extra ones) are left out."""
    rows = []
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                parsed = {}
                for key, value in row.items():
                    if key is None or not isinstance(value, str) or value == "":
                        continue
                    try:
                        parsed[key] = float(value)
                    except ValueError:
                        continue
                rows.append(parsed)
    except (UnicodeDecodeError, csv.Error) as exc:
        problem = "is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else f"is not a readable CSV ({exc})"
        raise ResultsError(f"{path} {problem}: it is not a log rlf wrote; restore it or leave its run out") from None
    except OSError as exc:
        raise ResultsError(f"{path} cannot be read ({exc.strerror or exc}); check its permissions") from None
    return rows


# -- which runs ----------------------------------------------------------------------------------

def find_runs(patterns: Sequence[str | Path]) -> list[Run]:
    """The run directories that paths or globs name; a directory that is not a run but holds runs
    (at any depth, e.g. an experiment's output; hidden directories aside) stands for all of them."""
    if not patterns:
        raise ResultsError("name at least one run directory or glob, e.g. runs/ppo-*")
    found: dict[Path, None] = {}
    for pattern in patterns:
        text = str(pattern)
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        if glob.has_magic(text) and not matches:
            raise ResultsError(f"no files match {text!r}; check the pattern (quote it so the shell does not expand it)")
        for match in matches:
            path = Path(match)
            if not path.exists():
                raise ResultsError(f"{path} does not exist; pass run directories that `rlf train` created")
            if (path / RUN_FILE).is_file():
                found[path] = None
                continue
            if not path.is_dir():
                # a shell-expanded `runs/*` also names the files beside the runs (rlf experiment's
                # *.lock files, compare.md, logs); with no run among the arguments the error below says so
                continue
            # hidden directories (e.g. runs `rlf experiment` moved aside) are not searched
            nested = sorted(p.parent for p in path.rglob(RUN_FILE)
                            if not any(part.startswith(".") for part in p.relative_to(path).parts)
                            ) if path.is_dir() else []
            if not nested:
                if glob.has_magic(text):
                    continue  # a glob may also match files next to the runs (logs, tables)
                raise ResultsError(f"{path} is not an rlf run directory (no {RUN_FILE}) and holds none; "
                                   "pass directories that `rlf train` created")
            found.update(dict.fromkeys(nested))
    if not found:
        raise ResultsError(f"no rlf run directories among {', '.join(map(str, patterns))}")
    return [_read_run(path) for path in found]


def _read_run(path: Path) -> Run:
    try:
        data = json.loads((path / RUN_FILE).read_text())
        config = data["config"]
        config["run"]["algorithm"], config["run"]["env"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ResultsError(f"{path / RUN_FILE} is not an rlf run file (unreadable or missing its config)") from None
    return Run(path, config)


# -- grouping ------------------------------------------------------------------------------------

@dataclass
class Group:
    label: str
    algorithm: str
    env: str
    settings: dict[str, Any]
    runs: list[Run] = field(default_factory=list)


def group_runs(runs: Iterable[Run]) -> list[Group]:
    """Runs grouped by algorithm, environment and every other setting that is not a seed or a logging
    detail. Within one algorithm and env, the label names the settings in which groups differ
    (e.g. ``ppo on mario [env.extrinsic_reward=flag]``), so a dense and a sparse run are never averaged."""
    groups: dict[tuple, Group] = {}
    for run in runs:
        settings = run.settings()
        key = (run.algorithm, run.env, tuple(sorted((k, repr(v)) for k, v in settings.items())))
        if key not in groups:
            groups[key] = Group("", run.algorithm, run.env, settings)
        groups[key].runs.append(run)
    result = list(groups.values())
    for group in result:
        siblings = [g for g in result if (g.algorithm, g.env) == (group.algorithm, group.env)]
        differing = sorted({k for g in siblings for k in set(g.settings) | set(group.settings)
                            if g.settings.get(k) != group.settings.get(k)})
        shown = ", ".join(f"{k.split('.', 1)[1] if k.startswith('algo.') else k}={group.settings.get(k)}"
                          for k in differing)
        group.label = f"{group.algorithm} on {group.env}" + (f" [{shown}]" if shown else "")
        group.runs.sort(key=lambda r: (r.seed, str(r.path)))
    return result


# -- statistics ----------------------------------------------------------------------------------

def _iqm_rows(samples: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """IQM of each row of ``samples`` over its first ``counts[row]`` entries after sorting (NaN padded)."""
    ordered = np.sort(samples, axis=1)  # NaN padding sorts last
    cut = counts // 4
    lo, hi = cut, counts - cut
    prefix = np.concatenate([np.zeros((len(ordered), 1)), np.cumsum(np.nan_to_num(ordered), axis=1)], axis=1)
    rows = np.arange(len(ordered))
    return (prefix[rows, hi] - prefix[rows, lo]) / np.maximum(hi - lo, 1)


def bootstrap_ci(per_run: Sequence[np.ndarray], reps: int = 2000, seed: int = 0,
                 confidence: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals of the mean and the IQM of the pooled scores. Each replicate draws
    len(per_run) runs with replacement and, within each drawn run, as many of its scores with replacement."""
    per_run = [np.asarray(r, dtype=float) for r in per_run if len(r)]
    if not per_run:
        return {"mean": (math.nan, math.nan), "iqm": (math.nan, math.nan)}
    rng = np.random.default_rng(seed)
    sizes = np.array([len(r) for r in per_run])
    width = int(sizes.max())
    padded = np.full((len(per_run), width), np.nan)
    for i, r in enumerate(per_run):
        padded[i, :len(r)] = r
    chosen = rng.integers(0, len(per_run), size=(reps, len(per_run)))           # runs, per replicate
    picks = (rng.random((reps, len(per_run), width)) * sizes[chosen][..., None]).astype(int)
    drawn = padded[chosen[..., None], picks]                                    # reps x runs x width
    valid = np.arange(width)[None, None, :] < sizes[chosen][..., None]
    drawn = np.where(valid, drawn, np.nan).reshape(reps, -1)
    counts = valid.reshape(reps, -1).sum(axis=1)
    means = np.nansum(drawn, axis=1) / counts
    iqms = _iqm_rows(drawn, counts)
    tail = (1 - confidence) / 2 * 100
    return {"mean": tuple(float(x) for x in np.percentile(means, [tail, 100 - tail])),
            "iqm": tuple(float(x) for x in np.percentile(iqms, [tail, 100 - tail]))}


_THRESHOLD = re.compile(r"^(?P<name>[^<>=]+?)\s*(?P<op>>=|<=|>|<)\s*(?P<value>[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$")
_OPS = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}


def metric_column(rows: list[dict[str, float]], metric: str, source: str) -> str:
    """The column holding ``metric``: its own name, or for evaluation logs also ``eval/<metric>`` or
    ``mean_<metric>`` (periodic evaluation writes the mean over its episodes under such names)."""
    if source == "train":
        return metric
    present = {k for row in rows for k in row}
    for candidate in (metric, f"eval/{metric}", f"mean_{metric}", f"eval/mean_{metric}"):
        if candidate in present:
            return candidate
    return metric


def metric_series(rows: list[dict[str, float]], metric: str, source: str) -> tuple[list[dict[str, float]], np.ndarray]:
    """The rows that log ``metric`` and its value in each. A metric may be a threshold on a logged one,
    ``x_pos_max>2000`` (also >=, <, <=): 1 where the episode's value passes it, else 0, so its mean is the
    rate of episodes past the threshold (how often Mario gets beyond x 2,000, say)."""
    match = _THRESHOLD.match(metric.strip())
    name = match["name"].strip() if match else metric
    column = metric_column(rows, name, source)
    kept = [row for row in rows if column in row]
    values = np.array([row[column] for row in kept], dtype=float)
    if match:
        values = _OPS[match["op"]](values, float(match["value"])).astype(float)
    return kept, values


def final_scores(run: Run, metric: str, source: str = "train", last: int = 100) -> np.ndarray:
    """The metric over the run's last ``last`` episodes (train) or last ``last`` evaluation rows (eval)."""
    rows = run.table(source)
    kept, values = metric_series(rows, metric, source)
    if rows and not kept:
        columns = sorted({k for row in rows for k in row} - {"env_step", "episode"})
        hint = f"; {source} metrics of {run.path}: {', '.join(columns)}" if columns else ""
        raise ResultsError(f"metric {metric!r} is not logged by run {run.path}{hint}")
    return values[-last:]


def with_source(runs: Sequence[Run], source: str, note: Callable[[str], None] | None = None) -> list[Run]:
    """The runs that have ``source``'s log. Evaluation logs exist only for some runs (those trained with
    periodic evaluation, or evaluated by `rlf experiment`): the others are left out, and ``note`` told;
    none at all is an error."""
    if source not in SOURCES:
        raise ResultsError(f"unknown source {source!r}; use " + ", ".join(
            f"{name} ({file})" for name, file in SOURCES.items()))
    if source == "train":
        return list(runs)
    kept = [run for run in runs if (run.path / SOURCES[source]).is_file()]
    if not kept:
        runs[0].table(source)  # raises the one-line error that names the missing file
    if note and len(kept) < len(runs):
        left = [str(run.path) for run in runs if run not in kept]
        note(f"left out {len(left)} run(s) without {SOURCES[source]}: {', '.join(left)}")
    return kept


SCORES = ("mean", "sum")


def _run_score(values: np.ndarray, score: str) -> float:
    return float(values.sum() if score == "sum" else values.mean())


def _check_score(score: str, level: str = "run") -> None:
    if score not in SCORES:
        raise ResultsError(f"unknown score {score!r}; use mean (of the run's last episodes) or sum")
    if score == "sum" and level != "run":
        raise ResultsError("--score sum is a run's total; it needs --level run")


def compare(runs: Sequence[Run], metrics: Sequence[str] = ("return",), source: str = "train", last: int = 100,
            reps: int = 2000, seed: int = 0, note: Callable[[str], None] | None = None,
            level: str = "run", score: str = "mean") -> list[dict[str, Any]]:
    """One row per group: per metric the mean, median and IQM with bootstrap 95 % CIs; env steps, wall
    time, steps/s. ``level="run"``: over each run's score (the mean of its last ``last`` episodes), with
    ``<metric>_n`` the number of runs; ``level="episode"``: over the pooled final episodes, ``_n`` episodes.
    ``score="sum"``: a run's score is the total of its last ``last`` episodes (a count, for a 0/1 metric
    such as ``flag``), which for runs of one budget compares what each achieved in it."""
    _check_score(score, level)
    runs = with_source(runs, source, note)
    if last < 1:
        raise ResultsError("--last must be at least 1")
    if not 1 <= reps <= MAX_REPS:
        raise ResultsError(f"--reps must be between 1 and {MAX_REPS:,} bootstrap replicates, not {reps}")
    if level not in LEVELS:
        raise ResultsError(f"unknown level {level!r}; use run (statistics over runs) or episode")
    rows = []
    for group in group_runs(runs):
        steps, walls = [], []
        for run in group.runs:
            run_steps, run_wall = run.progress()
            # metrics.csv lags by up to a log interval; an episode logged since is progress too
            ended = [row["env_step"] for row in run.table("train")[-1:] if "env_step" in row]
            steps.append(max([float(run_steps[-1]), *ended]))
            walls.append(float(run_wall[-1]))
        total_wall = sum(walls)
        row: dict[str, Any] = {
            "group": group.label, "algorithm": group.algorithm, "env": group.env, "level": level, "score": score,
            "runs": len(group.runs), "seeds": ",".join(str(r.seed) for r in group.runs),
            "env_steps": float(np.mean(steps)), "wall_s": float(np.mean(walls)),
            "steps_per_s": sum(steps) / total_wall if total_wall > 0 else math.nan,
        }
        for metric in metrics:
            per_run = [final_scores(run, metric, source, last) for run in group.runs]
            if level == "run":
                scores = np.array([_run_score(r, score) for r in per_run if len(r)])
                row[f"{metric}_n"] = int(len(scores))
                for name, estimate in interval_estimates(scores, reps=reps, seed=seed).items():
                    row[f"{metric}_{name}"] = estimate["value"]
                    row[f"{metric}_{name}_ci"] = list(estimate["ci"])
                continue
            pooled = np.concatenate(per_run) if per_run else np.empty(0)
            ci = bootstrap_ci(per_run, reps=reps, seed=seed)
            row[f"{metric}_n"] = int(len(pooled))
            row[f"{metric}_mean"] = float(pooled.mean()) if len(pooled) else math.nan
            row[f"{metric}_mean_ci"] = list(ci["mean"])
            row[f"{metric}_iqm"] = iqm(pooled)
            row[f"{metric}_iqm_ci"] = list(ci["iqm"])
        rows.append(row)
    return rows


def run_scores(runs: Sequence[Run], metric: str, source: str = "train", last: int = 100,
               score: str = "mean") -> np.ndarray:
    """Each run's score: the mean (or sum) of ``metric`` over its last ``last`` episodes (runs without any
    left out)."""
    scores = [final_scores(run, metric, source, last) for run in runs]
    return np.array([_run_score(s, score) for s in scores if len(s)])


def improvements(runs: Sequence[Run], metrics: Sequence[str], baseline: str | None = None, source: str = "train",
                 last: int = 100, reps: int = 2000, seed: int = 0, score: str = "mean") -> list[dict[str, Any]]:
    """The probability that a run of each group scores above a run of the baseline group (P(X > Y), ties
    half; bootstrap 95 % CI over both groups' runs), per metric, with the one-sided permutation test's p
    of "above" and, per metric, its Holm adjustment over the groups compared with the baseline. The
    baseline is the group whose label equals ``baseline``, else the only one whose label contains it,
    else (None) the first group."""
    _check_score(score)
    groups = group_runs(with_source(runs, source))
    if len(groups) < 2:
        return []
    if baseline is None:
        base = groups[0]
    else:
        exact = [g for g in groups if g.label == baseline or g.algorithm == baseline]
        partial = [g for g in groups if baseline in g.label]
        found = exact if len(exact) == 1 else partial
        if len(found) != 1:
            labels = "; ".join(g.label for g in groups)
            raise ResultsError(f"--baseline {baseline!r} names {len(found)} of the groups ({labels}); "
                               "give a label or algorithm that names exactly one")
        base = found[0]
    rows = []
    for metric in metrics:
        base_scores = run_scores(base.runs, metric, source, last, score)
        family = []
        for group in groups:
            if group is base:
                continue
            scores = run_scores(group.runs, metric, source, last, score)
            if not len(scores) or not len(base_scores):
                continue
            estimate = improvement_estimate(scores, base_scores, reps=reps, seed=seed)
            family.append({"group": group.label, "baseline": base.label, "metric": metric,
                           "runs": len(scores), "baseline_runs": len(base_scores),
                           "probability": estimate["value"], "ci": list(estimate["ci"]),
                           "p": permutation_p_value(scores, base_scores, seed=seed)})
        for row, adjusted in zip(family, holm([row["p"] for row in family]), strict=True):
            row["p_holm"] = adjusted
        rows.extend(family)
    return rows


# -- output --------------------------------------------------------------------------------------

def _num(value: float, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if abs(value) >= 1000 or value == int(value):
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _duration(seconds: float) -> str:
    if math.isnan(seconds):
        return "–"
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{sec:02d}s"


def format_table(rows: Sequence[dict[str, Any]], metrics: Sequence[str], fmt: str = "markdown") -> str:
    if fmt == "json":  # strict JSON: a statistic with no episodes behind it is null, not NaN
        def clean(value):
            if isinstance(value, float) and math.isnan(value):
                return None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            return [clean(v) for v in value] if isinstance(value, (list, tuple)) else value

        return json.dumps([{k: clean(v) for k, v in row.items()} for row in rows], indent=2)
    if fmt == "csv":
        flat = []
        for row in rows:
            out = {}
            for key, value in row.items():
                if isinstance(value, list):
                    out[f"{key}_low"], out[f"{key}_high"] = value
                else:
                    out[key] = value
            flat.append(out)
        columns = list(flat[0]) if flat else []
        from io import StringIO

        buffer = StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
        return buffer.getvalue()
    if fmt != "markdown":
        raise ResultsError(f"unknown format {fmt!r}; use markdown, csv or json")
    episodes = any(row.get("level") == "episode" for row in rows)
    stats = ("mean", "iqm") if episodes else ("mean", "median", "iqm")
    over = "over episodes" if episodes else "over runs"
    header = ["group", "seeds"]
    totals = any(row.get("score") == "sum" for row in rows)
    for metric in metrics:
        name = f"{metric} per run (sum)" if totals else metric
        header += [f"{name} {stat if stat != 'iqm' else 'IQM'} [95% CI {over}]" for stat in stats]
        header.append("episodes" if episodes else "runs")
    header += ["env steps", "wall", "steps/s"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [row["group"], row["seeds"]]
        for metric in metrics:
            for stat in stats:
                low, high = row[f"{metric}_{stat}_ci"]
                cells.append(f"{_num(row[f'{metric}_{stat}'])} [{_num(low)}, {_num(high)}]")
            cells.append(str(row[f"{metric}_n"]))
        cells += [_num(row["env_steps"]), _duration(row["wall_s"]), _num(row["steps_per_s"], 3)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_improvements(rows: Sequence[dict[str, Any]]) -> str:
    """The probability-of-improvement rows as a markdown table (empty with fewer than two groups)."""
    if not rows:
        return ""
    lines = ["| group | metric | P(group > baseline) [95% CI over runs] | p (one-sided) | p (Holm) | runs vs "
             "baseline runs | baseline |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        low, high = row["ci"]
        lines.append(f"| {row['group']} | {row['metric']} | {row['probability']:.2f} [{low:.2f}, {high:.2f}] | "
                     f"{row['p']:.3g} | {row['p_holm']:.3g} | {row['runs']} vs {row['baseline_runs']} | "
                     f"{row['baseline']} |")
    return "\n".join(lines) + "\n"

"""The ``compare``, ``plot`` and ``experiment`` subcommands. Parsers only at import time (the CLI
starts fast); numpy, matplotlib and the training stack load when a command runs."""

from __future__ import annotations

import argparse
from pathlib import Path


def _metrics(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one metric, e.g. return or x_pos_max,flag")
    return names


def _seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds are integers separated by commas, e.g. 0,1; got {text!r}") from None


def _bounded(low: int, high: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} is a whole number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{what} must be between {low:,} and {high:,}, got {value}")
        return value
    return parse


def _last(text: str) -> int:
    """--last N or all (every episode: the bound is more rows than any log holds)."""
    if text.strip().lower() == "all":
        return 10**9
    try:
        int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--last is a whole number or all, got {text!r}") from None
    return _bounded(1, 10**9, "--last")(text)


SOURCE_CHOICES = ("train", "eval", "final", "final-stochastic", "final-fixed-start", "learner")  # results.SOURCES, without importing numpy


def add_commands(sub) -> None:
    compare = sub.add_parser("compare", help="final performance of runs, grouped by algorithm and settings")
    compare.add_argument("runs", nargs="+", metavar="RUN_OR_GLOB",
                         help="run directories, globs, or directories holding runs")
    compare.add_argument("--metric", type=_metrics, default=["return"],
                         help="metric(s), comma-separated: return, x_pos_max, flag, capture, ... (default return); "
                              "a threshold such as 'x_pos_max>2000' scores the rate of episodes past it")
    compare.add_argument("--source", choices=SOURCE_CHOICES, default="train",
                         help="train: episodes.csv; eval: eval.csv (periodic evaluation); final / "
                              "final-stochastic: greedy / stochastic episodes after training (rlf experiment); "
                              "learner: metrics.csv (losses, entropy, intrinsic reward, per log interval)")
    compare.add_argument("--last", type=_last, default=100,
                         help="the last N episodes (rows) of each run (default 100), or all")
    compare.add_argument("--score", choices=("mean", "sum"), default="mean",
                         help="a run's score: the mean (default) or the sum of the metric over those episodes "
                              "(with --last all and a 0/1 metric such as flag: how many episodes reached it)")
    compare.add_argument("--format", choices=("markdown", "csv", "json"), default="markdown")
    compare.add_argument("--reps", type=_bounded(1, 100_000, "--reps"), default=2000,
                         help="bootstrap replicates (default 2000, at most 100,000)")
    compare.add_argument("--level", choices=("run", "episode"), default="run",
                         help="run (default): one score per run (the mean of its last N episodes), statistics "
                              "and intervals over runs; episode: every final episode pooled, intervals over "
                              "runs and their episodes (they describe these runs, not the algorithm)")
    compare.add_argument("--baseline", metavar="GROUP",
                         help="the group the others' probability of improvement is against: its label or "
                              "algorithm (default: the first group)")

    plot = sub.add_parser("plot", help="learning curves of runs (needs rlf[plot])")
    plot.add_argument("runs", nargs="+", metavar="RUN_OR_GLOB")
    plot.add_argument("-o", "--output", type=Path, default=Path("curves.png"), help="image file (.png, .svg, .pdf)")
    plot.add_argument("--metric", default="return", help="metric to plot (default return)")
    plot.add_argument("--x", choices=("steps", "wall"), default="steps", help="x axis: env steps or wall time")
    plot.add_argument("--smooth", type=_bounded(1, 10**6, "--smooth"), default=10,
                      help="moving-average window in episodes (1 = none)")
    plot.add_argument("--source", choices=SOURCE_CHOICES, default="train")
    plot.add_argument("--title")
    plot.add_argument("--profile", action="store_true",
                      help="performance profiles instead of curves: per group, the fraction of runs whose score "
                           "(mean of the last --last episodes) exceeds each threshold, with bootstrap bands")
    plot.add_argument("--last", type=_last, default=100,
                      help="with --profile: the last N episodes (rows) of each run (default 100), or all")

    experiment = sub.add_parser("experiment", help="train an experiment file's runs (resumably), then report")
    experiment.add_argument("file", type=Path, help="experiment TOML, e.g. experiments/mario-1-1.toml")
    experiment.add_argument("--only", action="append", default=[], metavar="PATTERN",
                            help="only runs whose name matches (e.g. 'game/ppo-*'); repeatable")
    experiment.add_argument("--steps", type=int, help="override the budget of every run")
    experiment.add_argument("--seeds", type=_seeds, help="override every algorithm's seeds, e.g. 0,1")
    experiment.add_argument("--eval-episodes", type=int, help="override the evaluation episodes per run and mode")
    experiment.add_argument("--runs-dir", help="where the runs go (default: the file's runs_dir)")
    experiment.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                            help="override a setting of every run, e.g. --set num_envs=4")
    experiment.add_argument("--dry-run", action="store_true", help="list the runs and their state; train nothing")
    experiment.add_argument("--report-only", action="store_true",
                            help="write the table and plot from the runs so far; train nothing")


def _compare(args) -> int:
    import sys

    from rlf.experiments.results import (
        ResultsError,
        compare,
        find_runs,
        format_improvements,
        format_table,
        improvements,
    )

    runs = find_runs(args.runs)
    rows = compare(runs, args.metric, args.source, args.last, reps=args.reps, level=args.level, score=args.score,
                   note=lambda text: print(f"rlf: {text}", file=sys.stderr))
    empty = [row["group"] for row in rows if not any(row[f"{metric}_n"] for metric in args.metric)]
    if len(empty) == len(rows):
        raise ResultsError(f"nothing to compare: no run has {args.source} rows with {', '.join(args.metric)} "
                           "(empty, header-only or missing logs); train longer or name other runs")
    if empty:
        print(f"rlf: warning: no {args.source} rows with {', '.join(args.metric)} in group(s) {'; '.join(empty)} "
              "(empty, header-only or missing logs): their cells are dashes", file=sys.stderr)
    better = improvements(runs, args.metric, args.baseline, args.source, args.last, reps=args.reps,
                          score=args.score)
    if args.format == "json":  # each group's row carries its probability of improvement over the baseline
        for row in rows:
            for item in better:
                if item["group"] == row["group"]:
                    row[f"{item['metric']}_improvement"] = {
                        k: item[k] for k in ("baseline", "probability", "ci", "p", "p_holm", "runs",
                                             "baseline_runs")}
    print(format_table(rows, args.metric, args.format), end="")
    if better and args.format == "markdown":
        print(f"\nProbability of improvement over {better[0]['baseline']}: the chance that a run of the group "
              "scores above a run of the baseline (0.5 = no difference); p: a one-sided permutation test of "
              "\"above\" over runs, Holm-adjusted over the groups\n")
        print(format_improvements(better), end="")
    return 0


def _plot(args) -> int:
    import sys

    from rlf.experiments.plotting import plot_profile, plot_runs
    from rlf.experiments.results import find_runs

    if args.profile:
        drawn = plot_profile(find_runs(args.runs), args.output, metric=args.metric, source=args.source,
                             last=args.last, title=args.title, note=lambda text: print(f"rlf: {text}", file=sys.stderr))
        print(f"wrote {args.output} ({len(drawn)} profile(s))", file=sys.stderr)
        return 0
    drawn = plot_runs(find_runs(args.runs), args.output, metric=args.metric, x=args.x, smooth=args.smooth,
                      source=args.source, title=args.title, note=lambda text: print(f"rlf: {text}", file=sys.stderr))
    print(f"wrote {args.output} ({len(drawn)} curve(s))", file=sys.stderr)
    return 0


def _experiment(args) -> int:
    from rlf.experiments.runner import main

    return main(args)


COMMANDS = {"compare": _compare, "plot": _plot, "experiment": _experiment}

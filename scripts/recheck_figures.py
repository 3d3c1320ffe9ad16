"""Recheck the learning figures the docs' tables publish, on today's code, and say which no longer reproduce.

Run before a release, not in CI (the minutes-long figures take about an hour on two quiet cores; the Mario
ones take hours each and are only listed unless --all):

    python scripts/recheck_figures.py --list              what would be rechecked, with the published numbers
    python scripts/recheck_figures.py                     recheck every minutes-long figure
    python scripts/recheck_figures.py --only dqn-cartpole-preset --seeds 1
    python scripts/recheck_figures.py --all               the hours-long Mario figures too

Each figure is the plain CLI command a user would type (`rlf train ... --seed S`, then `rlf eval --json`
or the run's episodes.csv), one seed at a time, with its published per-seed numbers and the tolerance
within which a measurement still reproduces them. The closing lines name every figure that no longer
reproduces; the exit code is 1 if any does, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Figure:
    name: str
    where: str
    """The docs' table it comes from."""
    train: tuple[str, ...]
    """`rlf train` arguments; --seed, --run-dir and --no-progress are added."""
    measure: str
    """'greedy': `rlf eval RUN --episodes 10 --json`'s return; 'steps_to_475': the first env step at which
    the mean return of the last 100 episodes reaches 475 (from episodes.csv; None if never)."""
    published: tuple[float | None, ...]
    """Per seed 0, 1, 2."""
    tolerance: str
    """How a measurement is compared with the published numbers (see ``reproduces``)."""
    duration: str = "minutes"
    extra: dict = field(default_factory=dict)


FIGURES = (
    Figure("dqn-cartpole-preset", "docs/BENCHMARKS.md, DQN CartPole-v1 (rlf DQN, the preset); plugins/dqn/README.md",
           ("dqn", "--env", "gym:CartPole-v1", "--steps", "50000"), "greedy", (500.0, 500.0, 500.0),
           "each seed >= 195 (the preset's target) and within 5% of the published number"),
    Figure("dqn-cartpole-defaults", "docs/BENCHMARKS.md, DQN CartPole-v1 (rlf DQN, default settings)",
           ("dqn", "--env", "gym:CartPole-v1", "--steps", "50000", "--no-preset"), "greedy", (143.0, 417.0, 90.0),
           "mean over the seeds within 50% of the published mean"),
    Figure("ppo-cartpole-preset", "docs/BENCHMARKS.md, PPO CartPole-v1, presets (rlf PPO)",
           ("ppo", "--env", "gym:CartPole-v1"), "steps_to_475", (57_000.0, 55_000.0, 60_000.0),
           "every seed reaches 475, the median env step within 20% of the published median"),
    Figure("sac-pendulum", "docs/BENCHMARKS.md, SAC Pendulum-v1 (rlf)",
           ("sac", "--env", "gym:Pendulum-v1", "--steps", "20000", "--set", "algo.actor_lr=0.0003", "--set",
            "algo.critic_lr=0.0003", "--set", "algo.alpha_lr=0.0003", "--set", "algo.hidden_sizes=[256, 256]"),
           "greedy", (None, None, -109.7),
           "every seed >= -250 and the median within 50 of the published median (-109.7)"),
    Figure("mario-1-1-preset", "docs/results (the Mario series and the 1-1 recipe search)", ("ppo", "--env", "mario"),
           "greedy", (None, None, None), "see the results pages' check histories", duration="hours"),
)


def reproduces(figure: Figure, measured: list[float | None]) -> tuple[bool, str]:
    """(still reproduces, why) for the seeds measured (a prefix of 0, 1, 2 or any subset via --seeds)."""
    values = [m for m in measured if m is not None]
    if figure.name == "dqn-cartpole-preset":
        ok = len(values) == len(measured) and all(v >= 195 and v >= 0.95 * 500 for v in values)
        return ok, f"{sum(v >= 195 for v in values)}/{len(measured)} seeds >= 195"
    if figure.name == "dqn-cartpole-defaults":
        mean, published = statistics.fmean(values), statistics.fmean(p for p in figure.published if p is not None)
        return abs(mean - published) <= 0.5 * published, f"mean {mean:.1f} against {published:.1f}"
    if figure.name == "ppo-cartpole-preset":
        if len(values) < len(measured):
            return False, f"{len(measured) - len(values)} seed(s) never reached 475"
        median, published = statistics.median(values), statistics.median(figure.published)
        return abs(median - published) <= 0.2 * published, f"median {median:,.0f} against {published:,.0f}"
    if figure.name == "sac-pendulum":
        median = statistics.median(values)
        ok = len(values) == len(measured) and all(v >= -250 for v in values) and abs(median + 109.7) <= 50
        return ok, f"median {median:.1f} against -109.7, {sum(v >= -250 for v in values)}/{len(measured)} >= -250"
    raise ValueError(figure.name)


def steps_to_475(episodes_csv: Path) -> float | None:
    window: list[float] = []
    with open(episodes_csv, newline="") as handle:
        for row in csv.DictReader(handle):
            window = (window + [float(row["return"])])[-100:]
            if len(window) == 100 and statistics.fmean(window) >= 475:
                return float(row["env_step"])
    return None


def run_one(figure: Figure, seed: int, workdir: Path, rlf: str, timeout: float) -> float | None:
    run = workdir / f"{figure.name}-seed{seed}"
    train = [rlf, "train", *figure.train, "--seed", str(seed), "--run-dir", str(run), "--no-progress"]
    done = subprocess.run(train, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{' '.join(train)} failed (exit {done.returncode}): {tail}")
    if figure.measure == "steps_to_475":
        return steps_to_475(run / "episodes.csv")
    evaluated = subprocess.run([rlf, "eval", str(run), "--episodes", "10", "--json"], capture_output=True, text=True,
                               timeout=timeout)
    if evaluated.returncode != 0:
        raise RuntimeError(f"rlf eval {run} failed: {evaluated.stderr.strip()[-300:]}")
    return float(json.loads(evaluated.stdout)["return"])


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", "--dry-run", action="store_true", dest="list",
                        help="list the figures, their commands and published numbers; run nothing")
    parser.add_argument("--all", action="store_true", help="also the figures that take hours (Mario)")
    parser.add_argument("--only", default="", help="comma-separated figure names (see --list)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], choices=(0, 1, 2))
    parser.add_argument("--rlf", default="rlf", help="the rlf command (default: rlf on PATH)")
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds one run may take")
    args = parser.parse_args(argv)
    names = {figure.name for figure in FIGURES}
    args.only = [name for name in args.only.split(",") if name]
    unknown = sorted(set(args.only) - names)
    if unknown:
        parser.exit(2, f"recheck_figures: unknown figure(s) {', '.join(unknown)}; known: {', '.join(sorted(names))}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    chosen = [f for f in FIGURES if not args.only or f.name in args.only]
    if args.list:
        for figure in chosen:
            note = "" if figure.duration == "minutes" or args.all else "  (not rechecked: hours; --all runs it)"
            seeds = ", ".join("-" if p is None else f"{p:g}" for p in figure.published)
            print(f"{figure.name}{note}\n  from: {figure.where}\n  run:  rlf train {' '.join(figure.train)} --seed S"
                  f" ({figure.measure})\n  published (seeds 0, 1, 2): {seeds}\n  reproduces when: {figure.tolerance}")
        return 0
    stale, kept, skipped = [], [], []
    with tempfile.TemporaryDirectory(prefix="rlf-recheck-") as workdir:
        for figure in chosen:
            if figure.duration != "minutes" and not args.all:
                skipped.append(figure.name)
                print(f"{figure.name}: not rechecked: hours (--all runs it)", flush=True)
                continue
            if figure.duration != "minutes":
                skipped.append(figure.name)
                print(f"{figure.name}: not rechecked: its check is the results pages' own (scripts/mario_results.py)")
                continue
            measured = []
            for seed in args.seeds:
                start = time.monotonic()
                value = run_one(figure, seed, Path(workdir), args.rlf, args.timeout)
                measured.append(value)
                print(f"{figure.name} seed {seed}: {value} (published {figure.published[seed]}), "
                      f"{time.monotonic() - start:.0f} s", flush=True)
            ok, why = reproduces(figure, measured)
            (kept if ok else stale).append(f"{figure.name} ({why})")
    print(f"still reproduce: {', '.join(kept) or 'none'}")
    if skipped:
        print(f"not rechecked: {', '.join(skipped)}")
    print(f"no longer reproduce: {', '.join(stale) or 'none'}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

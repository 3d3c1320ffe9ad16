"""Regenerate the Mario series section of docs/results/mario-1-1.md from the runs.

    python scripts/mario_results.py [--runs runs/mario-1-1] [--ab runs/mario-1-1-resize] [--page docs/results/mario-1-1.md]

Writes, between the page's ``<!-- series:begin -->`` and ``<!-- series:end -->`` markers: per setting the
training table (last 100 episodes of each run, mean and IQM with 95 % bootstrap CIs, `rlf compare`'s
numbers), the flags reached over all training episodes, the evaluation tables of the runs evaluated so
far, and the 84-vs-42 input-size A/B over the env steps both arms have. Curves over env steps and
over wall hours go to docs/results/mario-1-1-<setting>-{steps,wall}.png. Everything else on the page
is prose and stays as written.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rlf.experiments.results import compare, find_runs, format_table, read_rows
from rlf.experiments.spec import FINAL_EVAL_FILES, FINAL_EVAL_SOURCES

METRICS = ["x_pos_max", "flag"]
BEGIN, END = "<!-- series:begin -->", "<!-- series:end -->"


def flags(run_path: Path) -> tuple[int, int, int | None]:
    """(flags reached, episodes, env step of the first flag) over all training episodes of a run."""
    rows = read_rows(run_path / "episodes.csv")
    reached = [row for row in rows if row.get("flag", 0) >= 1]
    first = int(reached[0]["env_step"]) if reached and "env_step" in reached[0] else None
    return len(reached), len(rows), first


def section(runs_dir: Path, ab_dir: Path | None, out_dir: Path) -> str:
    lines = [f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python scripts/mario_results.py` "
             f"from `{runs_dir}`.", ""]
    for setting in ("game", "none"):
        paths = [p for p in sorted((runs_dir / setting).glob("*-seed*")) if (p / "run.json").is_file()]
        if not paths:
            continue
        runs = find_runs(paths)
        title = "Game reward (shaped)" if setting == "game" else "No extrinsic reward"
        lines += [f"### {title}: training episodes, the last 100 of each run", "",
                  format_table(compare(runs, METRICS, "train", 100), METRICS), ""]
        lines += ["Flags over all training episodes: " + "; ".join(
            f"{run.path.name} {reached} of {episodes}" + (f" (first at env step {first:,})" if first else "")
            for run in runs for reached, episodes, first in [flags(run.path)]) + ".", ""]
        for mode, name in FINAL_EVAL_FILES.items():
            evaluated = [run for run in runs if (run.path / name).is_file()]
            if evaluated:
                lines += [f"### {title}: {mode} evaluation after training", "",
                          format_table(compare(evaluated, METRICS, FINAL_EVAL_SOURCES[mode], 10**9), METRICS), ""]
        try:
            from rlf.experiments.plotting import plot_runs

            for axis in ("steps", "wall"):
                png = out_dir / f"mario-1-1-{setting}-{axis}.png"
                plot_runs(runs, png, metric="x_pos_max", x=axis, smooth=50,
                          title=f"Mario 1-1, {title.lower()}: furthest x per episode (50-episode mean)")
                lines += [f"![{title}, x_pos_max over {'env steps' if axis == 'steps' else 'wall time'}]"
                          f"({png.name})", ""]
        except Exception as exc:  # noqa: BLE001 - a missing matplotlib costs the plot, not the tables
            lines += [f"(no plot: {exc})", ""]
    ab = ab_dir / "game" / "ppo-seed0" if ab_dir is not None else None
    arm42 = runs_dir / "game" / "ppo-seed0"
    if ab is not None and (ab / "episodes.csv").is_file() and (arm42 / "episodes.csv").is_file():
        both = min(max(int(r["env_step"]) for r in read_rows(p / "episodes.csv")) for p in (ab, arm42))
        lines += [f"### Input size A/B: PPO seed 0 at 84x84 against 42x42, the episodes of the first {both:,} "
                  "env steps of each", ""]
        table = []
        for label, path in (("84x84", ab), ("42x42", arm42)):
            rows = [r for r in read_rows(path / "episodes.csv") if int(r["env_step"]) <= both]
            last = rows[-100:]
            table.append(f"| {label} | {len(rows)} | {sum(r['x_pos_max'] for r in last) / len(last):.0f} | "
                         f"{sum(r.get('flag', 0) for r in rows):.0f} |")
        lines += ["| input | episodes | x_pos_max, mean of the last 100 | flags |", "|---|---|---|---|", *table, ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/mario-1-1"))
    parser.add_argument("--ab", type=Path, default=Path("runs/mario-1-1-resize"))
    parser.add_argument("--page", type=Path, default=Path("docs/results/mario-1-1.md"))
    args = parser.parse_args(argv)
    page = args.page.read_text()
    if BEGIN not in page or END not in page:
        print(f"mario_results: error: {args.page} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 2
    if not args.runs.is_dir():
        print(f"mario_results: error: no runs directory {args.runs}", file=sys.stderr)
        return 2
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = section(args.runs, args.ab if args.ab.is_dir() else None, args.page.parent)
    args.page.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")
    print(f"wrote {args.page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate the Mario series section of docs/results/mario-1-1.md from the runs.

    python scripts/mario_results.py [--runs runs/mario-1-1] [--ab runs/mario-1-1-resize] [--page docs/results/mario-1-1.md]
                                    [--fast runs/mario-1-1-fast] [--fast-page docs/results/mario-1-1-fast.md]
                                    [--summary docs/results/mario-1-1-summary.json]

Writes, between the page's ``<!-- series:begin -->`` and ``<!-- series:end -->`` markers: per setting the
training table (last 100 episodes of each run, mean and IQM with 95 % bootstrap CIs, `rlf compare`'s
numbers; the game-reward tables show the random policy's no-reward runs as their floor), the flags
reached over all training episodes, the evaluation tables of the runs evaluated so
far, the 84-vs-42 input-size A/B over the env steps both arms have, and APPO against PPO over the env
steps all their seeds have (issue 25). Curves over env steps and
over wall hours go to docs/results/mario-1-1-<setting>-{steps,wall}.png. Everything else on the page
is prose and stays as written.

The recipe search for a fast clear (``--fast``, experiments/mario-1-1-fast.toml) gets its trial table on its
own page, between the same markers, with the series' game/ppo runs as the baseline. Every run of both
goes into one machine-readable file (``--summary``): a record per run with its budget, wall time, the env
step and wall time of its clear (the ``until`` check that ended it; null if none did) and each final
evaluation's episodes, flags and mean furthest x.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from rlf.experiments.results import Run, bootstrap_ci, compare, find_runs, format_table, read_rows
from rlf.experiments.spec import FINAL_EVAL_FILES, FINAL_EVAL_SOURCES

METRICS = ["x_pos_max", "flag"]
FLOOR = "random"
BEGIN, END = "<!-- series:begin -->", "<!-- series:end -->"


def flags(run_path: Path) -> tuple[int, int, int | None]:
    """(flags reached, episodes, env step of the first flag) over all training episodes of a run."""
    rows = read_rows(run_path / "episodes.csv")
    reached = [row for row in rows if row.get("flag", 0) >= 1]
    first = int(reached[0]["env_step"]) if reached and "env_step" in reached[0] else None
    return len(reached), len(rows), first


def episodes_upto(rows: list[dict[str, float]], steps: int) -> list[dict[str, float]]:
    """The training episodes (a run's episodes.csv rows) that ended at or before env step ``steps``."""
    return [r for r in rows if int(r["env_step"]) <= steps]


def common_steps(tables: list[list[dict[str, float]]]) -> int:
    """The env steps every one of the runs has reached (the last episode's end of the shortest)."""
    return min(max(int(r["env_step"]) for r in rows) for rows in tables)


def per_step_comparison(setting_dir: Path, base: str, other: str, last: int = 100,
                        milestones: int = 4) -> list[str]:
    """Two algorithms' seeds over the same first env steps (issue 25: does APPO learn as PPO does per env
    step?). Each row: the mean furthest x of the last ``last`` episodes before each milestone, pooled over
    seeds with a bootstrap CI over seeds and episodes at the last one, and the flags reached in the window."""
    tables = {name: [read_rows(p / "episodes.csv") for p in sorted(setting_dir.glob(f"{name}-seed*"))
                     if (p / "episodes.csv").is_file()]
              for name in (base, other)}
    if not all(tables.values()):
        return []
    upto = common_steps(tables[base] + tables[other])
    marks = [upto * (i + 1) // milestones for i in range(milestones)]
    head = " | ".join(f"x at {m / 1e6:.2f}M" for m in marks[:-1])
    lines = [f"### {other.upper()} against {base.upper()} per env step: the episodes of the first {upto:,} env "
             "steps of each run", "",
             f"Mean furthest x of the last {last} training episodes before each point (pooled over seeds; 95 % "
             "bootstrap CI over seeds and episodes at the end of the window), and the flags reached in the window.",
             "", f"| algorithm | seeds | {head} | x at {upto / 1e6:.2f}M [95% CI] | flags | first flag at |",
             "|---|---|" + "---|" * (len(marks) - 1) + "---|---|---|"]
    for name in (base, other):
        cells = []
        for mark in marks:
            per_run = [np.asarray([r["x_pos_max"] for r in episodes_upto(rows, mark)][-last:])
                       for rows in tables[name]]
            mean = float(np.concatenate(per_run).mean())
            if mark == upto:
                low, high = bootstrap_ci(per_run)["mean"]
                cells.append(f"{mean:,.0f} [{low:,.0f}, {high:,.0f}]")
            else:
                cells.append(f"{mean:,.0f}")
        window = [episodes_upto(rows, upto) for rows in tables[name]]
        reached = [[int(r["env_step"]) for r in rows if r.get("flag", 0) >= 1] for rows in window]
        firsts = ", ".join(f"{hits[0]:,}" if hits else "none" for hits in reached)
        lines.append(f"| {name} | {len(tables[name])} | {' | '.join(cells)} | "
                     f"{sum(len(h) for h in reached)} of {sum(len(rows) for rows in window)} | {firsts} |")
    return lines + [""]


def setting_paths(runs_dir: Path, setting: str) -> list[Path]:
    """The run directories whose rows a setting's tables and curves show. The game-reward ones include
    the random policy's no-reward runs as the floor (issue 26: DQN against random): a random policy never
    reads the reward, and the two settings' reward wrappers end episodes alike, so its furthest x and flags
    are what a game-reward random run would measure; running it twice would only spend emulator hours."""
    def runs_in(directory: Path, pattern: str) -> list[Path]:
        return [p for p in sorted(directory.glob(pattern)) if (p / "run.json").is_file()]

    paths = runs_in(runs_dir / setting, "*-seed*")
    if setting == "game" and paths and not runs_in(runs_dir / setting, f"{FLOOR}-seed*"):
        paths += runs_in(runs_dir / "none", f"{FLOOR}-seed*")
    return paths


def section(runs_dir: Path, ab_dir: Path | None, out_dir: Path) -> str:
    lines = [f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python scripts/mario_results.py` "
             f"from `{runs_dir}`.", ""]
    for setting in ("game", "none"):
        paths = setting_paths(runs_dir, setting)
        if not paths:
            continue
        runs = find_runs(paths)
        title = "Game reward (shaped)" if setting == "game" else "No extrinsic reward"
        lines += [f"### {title}: training episodes, the last 100 of each run", "",
                  format_table(compare(runs, METRICS, "train", 100), METRICS), ""]
        if any(p.parent.name != setting for p in paths):
            lines += [f"The {FLOOR} rows here are the no-reward setting's {FLOOR} runs, the floor of both "
                      "tables: a random policy does not read the reward, and episodes end the same way in "
                      "both settings.", ""]
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
        arms = {"84x84": read_rows(ab / "episodes.csv"), "42x42": read_rows(arm42 / "episodes.csv")}
        both = common_steps(list(arms.values()))
        lines += [f"### Input size A/B: PPO seed 0 at 84x84 against 42x42, the episodes of the first {both:,} "
                  "env steps of each", ""]
        table = []
        for label, episodes in arms.items():
            rows = episodes_upto(episodes, both)
            last = rows[-100:]
            table.append(f"| {label} | {len(rows)} | {sum(r['x_pos_max'] for r in last) / len(last):.0f} | "
                         f"{sum(r.get('flag', 0) for r in rows):.0f} |")
        lines += ["| input | episodes | x_pos_max, mean of the last 100 | flags |", "|---|---|---|---|", *table, ""]
    for variant in ("appo", "appo-r2"):  # APPO's first recipe, and its second (experiments/mario-1-1.toml)
        lines += per_step_comparison(runs_dir / "game", "ppo", variant)
    return "\n".join(lines)


def run_record(experiment: str, run: Run) -> dict:
    """One run of ``experiment`` as a plain record: what the summary file holds for it."""
    steps, wall = run.progress()
    marker = run.path / "experiment.json"
    done = json.loads(marker.read_text()) if marker.is_file() else {}
    started = done.get("started_at")
    if "env_steps" not in done:  # the marker of a run still training holds only its start
        done = {}
    env_steps = int(done.get("env_steps", steps[-1]))
    until = done.get("until")
    cleared = env_steps if until is not None else None
    evaluations = {}
    for mode, name in FINAL_EVAL_FILES.items():
        if (run.path / name).is_file():
            rows = read_rows(run.path / name)
            evaluations[mode] = {
                "episodes": len(rows), "flags": int(sum(r.get("flag", 0) >= 1 for r in rows)),
                "mean_x_pos_max": round(float(np.mean([r["x_pos_max"] for r in rows])), 1) if rows else None}
    reached, episodes, first = flags(run.path)
    return {"experiment": experiment, "setting": run.path.parent.name, "arm": run.path.name.rsplit("-seed", 1)[0],
            "algorithm": run.algorithm, "seed": run.seed, "env_steps": env_steps,
            "wall_s": round(float(np.interp(env_steps, steps, wall)), 1), "done": bool(done),
            "cleared_at_env_step": cleared,
            "cleared_at_wall_s": None if cleared is None else round(float(np.interp(cleared, steps, wall)), 1),
            "clear_check": until, "started_at": started, "training_episodes": episodes, "training_flags": reached,
            "first_training_flag_at": first, "evaluations": evaluations}


def summary(sources: list[tuple[str, Path]]) -> list[dict]:
    """The records of every run of each (experiment name, runs directory) that exists, in a stable order."""
    records = []
    for experiment, runs_dir in sources:
        paths = [p for p in sorted(runs_dir.glob("*/*-seed*")) if (p / "run.json").is_file()] \
            if runs_dir.is_dir() else []
        records += [run_record(experiment, run) for run in find_runs(paths)] if paths else []
    return records


def checks(run_path: Path) -> str:
    """The value of each `until` check the run recorded (checks.csv), in order; "-" where it has none."""
    rows = read_rows(run_path / "checks.csv") if (run_path / "checks.csv").is_file() else []
    return ", ".join(f"{r['value']:.2g}" for r in rows if "value" in r) or "-"


def _changes(run: Run, base: Run | None) -> str:
    """The settings in which a trial differs from the baseline's, as `key=value`s."""
    if base is None:
        return ""
    mine, theirs = run.settings(), base.settings()
    # a field added to rlf after the baseline ran is absent from its run.json: at its off value, not a change
    keys = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k) and k != "algo.torch_threads"
                  and not (k not in theirs and mine.get(k) in (False, 0, None)))
    return ", ".join(f"{k.split('.', 1)[1]}={mine.get(k, '(unset)')}" for k in keys) or "(none)"


def trial_table(fast_dir: Path, baseline_dir: Path | None, preset_dir: Path | None = None) -> str:
    """The recipe search's table: the baseline runs (the series' game/ppo), then every trial, one row a run,
    then (``preset_dir``) the chosen recipe's runs as the preset runs them, on both cores."""
    base_paths = sorted(baseline_dir.glob("game/ppo-seed*")) if baseline_dir is not None else []
    trial_paths = [p for p in sorted(fast_dir.glob("*/*-seed*")) if (p / "run.json").is_file()]
    preset_paths = [p for p in sorted(preset_dir.glob("*/*-seed*")) if (p / "run.json").is_file()] \
        if preset_dir is not None and preset_dir.is_dir() else []
    bases = find_runs([p for p in base_paths if (p / "run.json").is_file()]) if base_paths else []
    trials = find_runs(trial_paths) if trial_paths else []
    presets = find_runs(preset_paths) if preset_paths else []
    base = bases[0] if bases else None
    lines = [f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python scripts/mario_results.py` "
             f"from `{fast_dir}`" + (f", `{preset_dir}`" if presets else "")
             + (f" and the baseline in `{baseline_dir}`" if base else "") + ".", "",
             "| trial | seed | changes from the baseline | env steps | cleared at env step | training wall to "
             "the clear (or so far) | env steps/s | flags in training (first at) | last-100 furthest x | "
             "final sampled evaluation: flags | check values (flag rate) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for label, runs in (("baseline", bases), ("trial", trials), ("preset", presets)):
        for run in runs:
            rec = run_record("", run)
            rows = read_rows(run.path / "episodes.csv") if (run.path / "episodes.csv").is_file() else []
            last = [r["x_pos_max"] for r in rows[-100:]]
            name = {"baseline": "baseline (former preset)", "preset": "preset (c64), both cores"}.get(label, rec["arm"])
            cleared = f"**{rec['cleared_at_env_step']:,}**" if rec["cleared_at_env_step"] else (
                f"not by {rec['env_steps']:,}" if rec["done"] else "running")
            ev = rec["evaluations"].get("stochastic")
            evaluated = f"{ev['flags']} of {ev['episodes']}" if ev else "-"
            first = f" ({rec['first_training_flag_at']:,})" if rec["first_training_flag_at"] else ""
            rate = rec["env_steps"] / rec["wall_s"] if rec["wall_s"] else 0.0
            changes = "" if label == "baseline" else _changes(run, base)
            lines.append(f"| {name} | {rec['seed']} | {changes} | {rec['env_steps']:,} | {cleared} | "
                         f"{rec['wall_s'] / 3600:.2f} h | {rate:.0f} | {rec['training_flags']} of "
                         f"{rec['training_episodes']}{first} | {np.mean(last) if last else 0:,.0f} | {evaluated} | "
                         f"{checks(run.path)} |")
    return "\n".join(lines)


def replace_section(page: Path, body: str) -> bool:
    """Write ``body`` between the page's markers; False (the page untouched) if it has none."""
    text = page.read_text()
    if BEGIN not in text or END not in text:
        return False
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/mario-1-1"))
    parser.add_argument("--ab", type=Path, default=Path("runs/mario-1-1-resize"))
    parser.add_argument("--page", type=Path, default=Path("docs/results/mario-1-1.md"))
    parser.add_argument("--fast", type=Path, default=Path("runs/mario-1-1-fast"))
    parser.add_argument("--fast-page", type=Path, default=Path("docs/results/mario-1-1-fast.md"))
    parser.add_argument("--preset", type=Path, default=Path("runs/mario-1-1-preset"),
                        help="the chosen recipe's runs on both cores (experiments/mario-1-1-preset.toml)")
    parser.add_argument("--summary", type=Path, default=Path("docs/results/mario-1-1-summary.json"))
    args = parser.parse_args(argv)
    for page in (args.page, args.fast_page):
        text = page.read_text() if page.is_file() else ""
        if BEGIN not in text or END not in text:
            print(f"mario_results: error: {page} has no {BEGIN} ... {END} markers", file=sys.stderr)
            return 2
    if not args.runs.is_dir():
        print(f"mario_results: error: no runs directory {args.runs}", file=sys.stderr)
        return 2
    replace_section(args.page, section(args.runs, args.ab if args.ab.is_dir() else None, args.page.parent))
    print(f"wrote {args.page}")
    if args.fast.is_dir():
        replace_section(args.fast_page, trial_table(args.fast, args.runs, args.preset))
        print(f"wrote {args.fast_page}")
    records = summary([("mario-1-1", args.runs), ("mario-1-1-fast", args.fast), ("mario-1-1-preset", args.preset)])
    partial = args.summary.with_name(f".{args.summary.name}.partial")
    partial.write_text(json.dumps({"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                   "runs": records}, indent=1) + "\n")
    partial.replace(args.summary)
    print(f"wrote {args.summary} ({len(records)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

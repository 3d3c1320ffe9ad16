"""docs/BENCHMARKS.md's current table, regenerated from the benchmark scripts by one command.

    python benchmarks/report.py                      # run every benchmark below, then rewrite the table
    python benchmarks/report.py --only ppo-mario     # rerun some (comma-separated), keep the others' records
    python benchmarks/report.py --render             # rewrite the table from the kept records only
    python benchmarks/report.py --list               # the benchmarks, their commands and whether recorded

Each benchmark is its script run unchanged, with ``RLF_BENCH_RECORD`` naming a file where the script's
tables are kept as JSON lines (benchmarks/results/<name>.jsonl, committed): the figures, the command, the
start and end time, and the load in every row. The table in docs/BENCHMARKS.md between the
``current-table`` markers is rebuilt from those records alone, so every figure on it was printed by a run
whose command stands beside it. A benchmark that has never run says so instead of showing an old figure.

The peers (SB3, PPAGE) live in their own venvs, made once as each script's docstring says; a missing peer
is that benchmark's one-line failure, and the others still run. Run it on a quiet machine: every row shows
the load its run saw, and a ratio measured at a high load is a ratio of shares of a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _common import UsageError, main_guard  # noqa: E402  the benchmarks' one-line bad-input path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DOC = REPO / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- current-table:begin -->", "<!-- current-table:end -->"

BENCHMARKS: dict[str, tuple[str, list[str]]] = {
    "ppo-mario": ("PPO on Mario vs SB3, 8 envs, identical hyperparameters, 1 torch thread each (target: >= 1.3x)",
                  ["benchmarks/peers/ppo_mario.py", "--rounds", "3", "--threads", "1"]),
    "ppo-cartpole": ("PPO on CartPole-v1 vs SB3: SB3's defaults on both, and rl-zoo's preset vs rlf's",
                     ["benchmarks/peers/ppo_cartpole.py", "--rounds", "3", "--ratio", "cpu"]),
    "dqn-cartpole": ("DQN on CartPole-v1 vs SB3 at rl-zoo's settings (50k steps), with rlf's defaults beside",
                     ["benchmarks/peers/dqn_cartpole.py", "--rounds", "3", "--with-defaults", "--ratio", "cpu"]),
    "sac-pendulum": ("SAC on Pendulum-v1 vs SB3 at the same settings (20k steps)",
                     ["benchmarks/sac_pendulum.py", "--impl", "both"]),
    "tabular-chase": ("Tabular IQL on the predator-prey chase vs PPAGE",
                      ["benchmarks/peers/tabular_chase.py", "--rounds", "3"]),
    "appo-mario": ("APPO (asynchronous actor-learner) vs synchronous PPO on Mario, 8 envs on the same cores "
                   "(target: APPO faster)", ["benchmarks/appo_mario.py", "--rounds", "3"]),
    "ray-mario": ("Ray vs async collection on Mario, CPU per env step of the whole process tree (target: <= 1.2x)",
                  ["benchmarks/ray_collector.py", "--rounds", "3", "--mario-steps", "2048", "--skip-cost"]),
    "worker-nice": ("collector.worker_nice on Mario: workers at niceness 0, 2 and 19, alone and beside busy programs", ["benchmarks/worker_nice.py", "--seconds", "45", "--rounds", "2"]),
    "mario-series": ("The Mario series at the emulator's speed: each model as a ratio of the bare emulator (targets: "
                     "PPO, DQN >= 0.8x; ICM, RND, kNN >= 0.5x)", ["benchmarks/mario_series.py", "--rounds", "2"]),
    "mario-startup": ("Start-up of `rlf train ppo --env mario` to the first env step and the first update",
                      ["benchmarks/mario_startup.py", "--rounds", "3"]),
}


def record_path(name: str) -> Path:
    return RESULTS / f"{name}.jsonl"


def read_records(name: str) -> list[dict]:
    path = record_path(name)
    if not path.is_file():
        return []
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                raise UsageError(f"{path}:{number} is not a JSON record; rerun --only {name} to replace it") from None
    return records


def run(name: str) -> bool:
    """Run one benchmark, its records replacing the old ones only if it succeeds."""
    what, command = BENCHMARKS[name]
    RESULTS.mkdir(parents=True, exist_ok=True)
    fresh = record_path(name).with_suffix(".jsonl.new")
    fresh.unlink(missing_ok=True)
    print(f"\n== {name}: {what}\n   python {' '.join(command)}", flush=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *command], cwd=REPO, env={**os.environ, "RLF_BENCH_RECORD": str(fresh)})
    if done.returncode != 0 or not fresh.is_file():
        print(f"== {name}: failed (exit code {done.returncode}) after {time.perf_counter() - started:.0f} s; "
              "its old records are kept", flush=True)
        fresh.unlink(missing_ok=True)
        return False
    fresh.replace(record_path(name))
    print(f"== {name}: recorded in {time.perf_counter() - started:.0f} s", flush=True)
    return True


def render() -> str:
    lines = [BEGIN, "", "_Regenerated by `python benchmarks/report.py` from benchmarks/results/*.jsonl; do not edit by "
             "hand. Every table is one run of the command above it; ratios are medians of rounds run side by "
             "side, alternating._", ""]
    for name, (what, command) in BENCHMARKS.items():
        lines.append(f"### {what}")
        records = read_records(name)
        if not records:
            lines += ["", f"Not measured yet: `python {' '.join(command)}`.", ""]
            continue
        for entry in records:
            lines += ["", f"**{entry['title']}** ({entry['header']})", "",
                      f"`{entry['command']}`, {entry['started']} to {entry['finished']}, {entry['machine']}, "
                      f"load average {entry['load_at_end']} at the end", "",
                      "| " + " | ".join(entry["columns"]) + " |", "|---" * len(entry["columns"]) + "|"]
            lines += ["| " + " | ".join(row) + " |" for row in entry["rows"]]
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def write_doc() -> None:
    text = DOC.read_text(encoding="utf-8")
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise UsageError(f"{DOC} must hold one {BEGIN} ... {END} pair; put it back where the table goes")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    temporary = DOC.with_suffix(".md.tmp")
    temporary.write_text(head + render() + tail, encoding="utf-8")
    temporary.replace(DOC)
    print(f"rewrote the current table in {DOC}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated, of: {', '.join(BENCHMARKS)}")
    parser.add_argument("--render", action="store_true", help="only rewrite the table from the kept records")
    parser.add_argument("--list", action="store_true", help="the benchmarks and whether each has a record")
    args = parser.parse_args()
    names = list(BENCHMARKS)
    if args.only:
        names = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in names if name not in BENCHMARKS]
        if unknown or not names:
            raise UsageError(f"--only {args.only!r}: unknown benchmark(s) {unknown}; choose from {', '.join(BENCHMARKS)}")
    if args.list:
        for name, (_, command) in BENCHMARKS.items():
            records = read_records(name)
            when = records[-1]["finished"] if records else "never"
            print(f"{name:<14} last recorded {when:<22} python {' '.join(command)}")
        return
    failed = [] if args.render else [name for name in names if not run(name)]
    write_doc()
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)} (their previous records, if any, are in the table)")


if __name__ == "__main__":
    main_guard(main)

"""Carry in-progress experiment runs across machines through the repository.

    python scripts/series_snapshot.py save    [--runs runs/mario-1-1] [--to experiments/snapshots/mario-1-1]
    python scripts/series_snapshot.py restore [--runs runs/mario-1-1] [--to experiments/snapshots/mario-1-1]

save copies, per run directory, what a resume needs and what the results page reads: the latest
checkpoint, run.json, the CSV logs and rlf's ownership files (no TensorBoard events, no older
checkpoints: a 42-px PPO run is ~1.5 MB). restore copies them back into a runs directory that does not
hold those runs yet; `rlf experiment FILE` then resumes each from its checkpoint. A run already
present in --runs is never overwritten (its own checkpoint may be newer).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

KEEP = ("checkpoint.rlf", "run.json", "metrics.csv", "episodes.csv", "eval.csv", "experiment.json",
        "final_eval.csv", "final_eval_stochastic.csv", "final_eval_fixed_start.csv", ".rlf-owner.json",
        ".rlf-files.json")


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/run.json") if not p.parent.name.startswith("."))


def copy_run(source: Path, target: Path) -> int:
    target.mkdir(parents=True, exist_ok=True)
    size = 0
    for name in KEEP:
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
            size += (source / name).stat().st_size
    return size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("save", "restore"))
    parser.add_argument("--runs", type=Path, default=Path("runs/mario-1-1"))
    parser.add_argument("--to", type=Path, default=Path("experiments/snapshots/mario-1-1"))
    args = parser.parse_args(argv)
    source, target = (args.runs, args.to) if args.action == "save" else (args.to, args.runs)
    runs = run_dirs(source)
    if not runs:
        print(f"series_snapshot: error: no runs (*/*/run.json) under {source}", file=sys.stderr)
        return 2
    for run in runs:
        relative = run.relative_to(source)
        if not (run / "checkpoint.rlf").is_file():
            print(f"{relative}: no checkpoint yet, skipped")
            continue
        destination = target / relative
        if args.action == "restore" and (destination / "run.json").exists():
            print(f"{relative}: already in {target}, left as it is")
            continue
        if args.action == "save" and destination.exists():
            shutil.rmtree(destination)  # the snapshot's own copy, replaced by the newer one
        size = copy_run(run, destination)
        print(f"{relative}: {size / 1e6:.1f} MB -> {destination}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

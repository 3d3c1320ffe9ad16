"""Carry in-progress experiment runs across machines through the repository.

    python scripts/series_snapshot.py save    [--runs runs/mario-1-1] [--to experiments/snapshots/mario-1-1]
    python scripts/series_snapshot.py restore [--runs runs/mario-1-1] [--to experiments/snapshots/mario-1-1]

save copies, per run directory, what a resume needs and what the results page reads: the latest
checkpoint, run.json, the CSV logs and rlf's ownership files (no TensorBoard events, no older
checkpoints: a 42-px PPO run is ~1.5 MB). The checkpoint's members are deflated in the copy: rlf writes
them stored (fast to save every few minutes), and a DQN replay of 50k Mario frames is 105 MB stored but
about 13 MB deflated, which is what a repository can carry (rlf loads both forms).
A finished run (its experiment.json records ``finished_at``) that has also been evaluated (a
``final_eval*.csv``) keeps its logs in the snapshot but not its checkpoint, which nothing needs any more:
the snapshot's copy is removed, so the repository stops carrying it. A finished run not yet evaluated keeps
its checkpoint: `rlf experiment` evaluates the final agents only after every run of its seeds has trained.
A run whose files the snapshot already holds is left alone, so a commit of the snapshot changes
only the runs that moved on. restore copies them back into a runs directory that does not hold those
runs yet; `rlf experiment FILE` then resumes each from its checkpoint. A run already
present in --runs is never overwritten (its own checkpoint may be newer).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import zipfile
import zlib
from pathlib import Path

KEEP = ("checkpoint.rlf", "run.json", "metrics.csv", "episodes.csv", "eval.csv", "experiment.json", "checks.csv",
        "final_eval.csv", "final_eval_stochastic.csv", "final_eval_fixed_start.csv", ".rlf-owner.json",
        ".rlf-files.json")


# Below rlf's own zip-bomb cap for one member (rlf.storage.checkpoint.Limits.max_compression_ratio, 50):
# a member that would deflate further (a replay's mostly-zero flags) stays stored, so the copy always loads.
MAX_RATIO = 40.0


def deflate_checkpoint(source: Path, target: Path) -> None:
    """Copy a checkpoint with each member deflated, where that keeps it loadable; same names, same order."""
    partial = target.with_name(f".{target.name}.partial")
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(partial, "w") as out:
        for info in archive.infolist():
            data = archive.read(info)
            member = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            member.compress_type = zipfile.ZIP_DEFLATED
            deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)  # zipfile's own settings
            packed = len(deflate.compress(data)) + len(deflate.flush())
            if len(data) > packed * MAX_RATIO or packed >= len(data):
                member.compress_type = zipfile.ZIP_STORED
            out.writestr(member, data)
    partial.replace(target)


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob("*/*/run.json") if not p.parent.name.startswith("."))


def same_file(source: Path, target: Path) -> bool:
    """Whether ``target`` already holds ``source``: for a checkpoint, the same structure.json (its
    counters, save time and every scalar; the deflated copy keeps it byte for byte), else the same bytes."""
    if not target.is_file():
        return False
    if source.name == "checkpoint.rlf":
        with zipfile.ZipFile(source) as one, zipfile.ZipFile(target) as other:
            return one.read("structure.json") == other.read("structure.json")
    return source.stat().st_size == target.stat().st_size and source.read_bytes() == target.read_bytes()


def finished(run: Path) -> bool:
    """Whether ``rlf experiment`` recorded the run as finished (its budget or its stopping rule reached)."""
    try:
        return "finished_at" in json.loads((run / "experiment.json").read_text())
    except (OSError, ValueError):
        return False


def evaluated(run: Path) -> bool:
    """Whether ``rlf experiment`` wrote a final evaluation of the run (which needs its last checkpoint)."""
    return any((run / name).is_file() for name in KEEP if name.startswith("final_eval"))


def copy_run(source: Path, target: Path, deflate: bool) -> tuple[int, int]:
    """Copy what a resume and the results page need; a file the target already holds is left as it is
    (so a repository's snapshot commit changes only the runs that moved on). (bytes written, files)"""
    target.mkdir(parents=True, exist_ok=True)
    size = files = 0
    done = deflate and finished(source) and evaluated(source)  # nothing will load its checkpoint again
    for name in KEEP:
        if not (source / name).is_file() or (done and name == "checkpoint.rlf"):
            (target / name).unlink(missing_ok=True)  # the snapshot's copy of a file the run no longer has
            continue
        if same_file(source / name, target / name):
            continue
        if deflate and name == "checkpoint.rlf":
            deflate_checkpoint(source / name, target / name)
        else:
            shutil.copy2(source / name, target / name)
        size += (target / name).stat().st_size
        files += 1
    return size, files


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
        if not (run / "checkpoint.rlf").is_file() and not finished(run):
            print(f"{relative}: no checkpoint yet, skipped")
            continue
        destination = target / relative
        if args.action == "restore" and (destination / "run.json").exists():
            print(f"{relative}: already in {target}, left as it is")
            continue
        size, files = copy_run(run, destination, deflate=args.action == "save")
        print(f"{relative}: {files} file(s), {size / 1e6:.1f} MB -> {destination}" if files else
              f"{relative}: unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())

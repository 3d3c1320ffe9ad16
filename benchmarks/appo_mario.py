"""Sync PPO against APPO on Mario: env steps per second and CPU seconds per env step, same model,
same 8 envs, same torch threads.

    python benchmarks/appo_mario.py [--steps 8192] [--rounds 3] [--torch-threads 1]

PPO runs plugins/ppo/src/rlf_plugin_ppo/presets/mario.toml (8 subprocess envs; the envs wait while it updates), APPO
plugins/appo/src/rlf_plugin_appo/presets/mario.toml (8 envs in 4 actor processes; the learner updates while they collect).
Each side is a `rlf train` process of its own, so its whole process tree (env workers, actors) is
measured: CPU seconds are the user + system time of every process in its tree, start-up included,
read from /proc every 0.2 s (getrusage of reaped children would miss env workers that a fork server,
not the run, reaps). Env steps/s come from the run's metrics.csv windows after the first (start-up
excluded).
The rounds alternate (PPO then APPO, then APPO then PPO, ...), so drifting load on a shared machine hits both alike; the
summary is the median of the rounds.
"""

from __future__ import annotations

import argparse
import csv
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
from _common import record  # noqa: E402

PRESETS = {"ppo": ROOT / "plugins" / "ppo" / "src" / "rlf_plugin_ppo" / "presets" / "mario.toml",
           "appo": ROOT / "plugins" / "appo" / "src" / "rlf_plugin_appo" / "presets" / "mario.toml"}


TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, float] | None:
    """(parent pid, own user + system CPU seconds) of a live process, from /proc/<pid>/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK


def tree_now(root: str) -> dict[str, float]:
    """Own CPU seconds of ``root`` and each live descendant, by pid, read from /proc now."""
    stats = {pid: stat for pid in os.listdir("/proc") if pid.isdigit() and (stat := _stat(pid)) is not None}
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, (parent, _) in stats.items():
            if pid not in tree and str(parent) in tree:
                tree.add(pid)
                grew = True
    return {pid: stats[pid][1] for pid in tree if pid in stats}


def tree_cpu(process: subprocess.Popen, interval: float = 0.2) -> float:
    """CPU seconds of ``process`` and all its descendants until it exits (each process's last sample:
    up to ``interval`` of a short-lived one's time is missed)."""
    seen: dict[str, float] = {}
    root = str(process.pid)
    while True:
        for pid, cpu in tree_now(root).items():
            seen[pid] = max(seen.get(pid, 0.0), cpu)
        if process.poll() is not None:
            return sum(seen.values())
        time.sleep(interval)


def run(algorithm: str, steps: int, torch_threads: int, log_interval: int, extra: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        command = [sys.executable, "-c", "import sys; from rlf.cli import main; sys.exit(main())", "train", algorithm,
                   "--env", "mario", "--config", str(PRESETS[algorithm]), "--steps", str(steps),
                   "--set", f"run_dir={run_dir}", "--set", "progress=false", "--set", "checkpoint_interval=0",
                   "--set", f"log_interval={log_interval}", "--set", f"algo.torch_threads={torch_threads}",
                   "--set", "loggers=['csv']", *extra]
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
        cpu = tree_cpu(process)
        wall = time.perf_counter() - start
        if process.returncode:
            raise SystemExit(f"{shlex.join(command)} failed with exit code {process.returncode}")
        with (run_dir / "metrics.csv").open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    windows = rows[1:] or rows  # the first window holds the start-up
    done, before = float(rows[-1]["env_step"]), float(windows[0]["env_step"]) - _window_steps(rows, windows[0])
    seconds = sum(_window_steps(rows, row) / float(row["steps_per_second"]) for row in windows)
    return {"steps_per_second": (done - before) / seconds, "cpu_per_step": cpu / done, "wall": wall, "steps": done}


def _window_steps(rows: list[dict[str, str]], row: dict[str, str]) -> float:
    index = rows.index(row)
    return float(row["env_step"]) - (float(rows[index - 1]["env_step"]) if index else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192, help="env steps per run (all envs together)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--torch-threads", type=int, default=1, help="algo.torch_threads of both")
    parser.add_argument("--log-interval", type=int, default=1024)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra override for both runs, as for `rlf train --set` (repeatable)")
    parser.add_argument("--appo-set", action="append", default=[], metavar="KEY=VALUE",
                        help="override for the APPO runs only, e.g. algo.epochs=4 (a variant of its preset)")
    args = parser.parse_args()
    extra = [item for value in args.set for item in ("--set", value)]
    extras = {"ppo": extra, "appo": extra + [item for value in args.appo_set for item in ("--set", value)]}
    print(f"$ {shlex.join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])}")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)
    results: dict[str, list[dict[str, float]]] = {"ppo": [], "appo": []}
    for number in range(1, args.rounds + 1):
        # the order flips each round, so load drifting during the run hits both sides alike
        for algorithm in ("ppo", "appo") if number % 2 else ("appo", "ppo"):
            results[algorithm].append(run(algorithm, args.steps, args.torch_threads, args.log_interval,
                                          extras[algorithm]))
        ppo, appo = results["ppo"][-1], results["appo"][-1]
        print(f"round {number}: PPO {ppo['steps_per_second']:6.1f} env steps/s, {1000 * ppo['cpu_per_step']:.2f} CPU ms/"
              f"step; APPO {appo['steps_per_second']:6.1f} env steps/s, {1000 * appo['cpu_per_step']:.2f} CPU ms/step; "
              f"ratio {appo['steps_per_second'] / ppo['steps_per_second']:.2f}", flush=True)
    median = {algorithm: {key: statistics.median(r[key] for r in rows) for key in ("steps_per_second", "cpu_per_step")}
              for algorithm, rows in results.items()}
    print(f"median of {args.rounds} round{'s' if args.rounds > 1 else ''}, {args.steps} env steps per run, "
          f"torch threads {args.torch_threads}: PPO {median['ppo']['steps_per_second']:.1f} env steps/s "
          f"({1000 * median['ppo']['cpu_per_step']:.2f} CPU ms/step), APPO {median['appo']['steps_per_second']:.1f} "
          f"env steps/s ({1000 * median['appo']['cpu_per_step']:.2f} CPU ms/step): APPO/PPO = "
          f"{median['appo']['steps_per_second'] / median['ppo']['steps_per_second']:.2f}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    ratio = median["appo"]["steps_per_second"] / median["ppo"]["steps_per_second"]
    variant = f" (APPO with {', '.join(args.appo_set)})" if args.appo_set else ""
    record(f"APPO vs sync PPO on Mario, 8 envs, {args.steps:,} env steps per run{variant}",
           f"medians of {args.rounds} rounds, alternating; torch threads {args.torch_threads} on both",
           ["case", "torch threads", "rounds", "env steps/s", "CPU ms per env step (whole process tree)", "APPO/PPO"],
           [[name.upper(), str(args.torch_threads), str(args.rounds), f"{median[name]['steps_per_second']:.1f}",
             f"{1000 * median[name]['cpu_per_step']:.2f}", "" if name == "ppo" else f"{ratio:.2f}x"]
            for name in ("ppo", "appo")])


if __name__ == "__main__":
    main()

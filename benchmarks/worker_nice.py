"""The async collector's ``collector.worker_nice`` on Mario: env steps per second with the env workers at
niceness 0, 2 (the default) and 19 above the trainer, on a machine of its own and beside busy programs.

    python benchmarks/worker_nice.py [--seconds 45] [--rounds 2] [--hogs 2]

Each run is ``rlf train ppo --env mario`` (8 subprocess envs, ``vector=async``, 1 torch thread, PPO at
SB3's Mario settings of benchmarks/peers/ppo_mario.py) in a fresh process, stopped after ``--seconds``
(SIGTERM: a shell's background jobs ignore SIGINT, and so would the run); its rate is the median
``steps_per_second`` of its metric rows after the first (start-up excluded), 0 when it wrote none. "shared" runs the same beside ``--hogs`` busy loops at niceness 0
(another user's jobs on the machine). Rounds alternate the order of the settings. Why a setting at all:
workers at 19 lose the CPU to anything else that runs (0 CPU seconds in 4 minutes were measured at load
~50), while a little lower priority than the trainer's lets the process that acts for all of them take
a core as soon as it has work (the pipelining of acting and stepping, core/rlf/training/on_policy.py).
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
from _common import UsageError, machine_line, main_guard, record  # noqa: E402
from ppo_mario import RLF_SETTINGS  # noqa: E402

NICENESS = (0, 2, 19)
RLF = str(Path(sys.executable).with_name("rlf"))
"""The console script of this interpreter's environment."""


def run(worker_nice: int, seconds: float) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        command = [RLF, "train", "ppo", "--env", "mario", "--steps", "10000000",
                   "--no-progress", "--no-preset", "--run-dir", str(run_dir)]
        for setting in [*RLF_SETTINGS, "algo.torch_threads=1", "log_interval=1024", "checkpoint_interval=0",
                        f"collector.worker_nice={worker_nice}"]:
            command += ["--set", setting]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        process = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(seconds)
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        path = run_dir / "metrics.csv"
        rows = list(csv.DictReader(path.open())) if path.is_file() else []
    rates = [float(row["steps_per_second"]) for row in rows[1:]]
    return statistics.median(rates) if rates else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=45.0, help="wall seconds per run (default 45)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hogs", type=int, default=2, help="busy loops beside the 'shared' runs (default 2)")
    args = parser.parse_args()
    if args.seconds < 20 or args.rounds < 1 or args.hogs < 1:
        raise UsageError("--seconds must be at least 20 (start-up and two metric rows), --rounds and --hogs at "
                         "least 1")
    at_start = machine_line()
    print(at_start, flush=True)
    results: dict[tuple[str, int], list[float]] = {}
    for condition in ("alone", "shared"):
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)
                ] if condition == "shared" else []
        try:
            for number in range(args.rounds):
                order = NICENESS if number % 2 == 0 else NICENESS[::-1]
                for nice in order:
                    rate = run(nice, args.seconds)
                    results.setdefault((condition, nice), []).append(rate)
                    print(f"  {condition:6s} round {number + 1}/{args.rounds} worker_nice {nice:2d}: "
                          f"{rate:7.1f} env steps/s", flush=True)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    title = "collector.worker_nice on Mario (PPO, 8 async env workers, 1 torch thread)"
    header = (f"median env steps/s of the metric rows after the first, {args.seconds:g} s per run, medians of "
              f"{args.rounds} rounds; 'shared': beside {args.hogs} busy loops at niceness 0; " + at_start)
    names = ["worker_nice", "alone: env steps/s", "/ default's", "shared: env steps/s", "/ default's"]
    rows = []
    for nice in NICENESS:
        row = [str(nice) + (" (default)" if nice == 2 else "")]
        for condition in ("alone", "shared"):
            value, default = (statistics.median(results[(condition, n)]) for n in (nice, 2))
            row += [f"{value:.1f}", f"{value / default:.2f}x" if default else ""]
        rows.append(row)
    print(f"\n{title}\n{header}\n| " + " | ".join(names) + " |\n" + "|---" * len(names) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    record(title, header, names, rows)


if __name__ == "__main__":
    main_guard(main)

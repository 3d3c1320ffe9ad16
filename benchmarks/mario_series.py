"""The Mario series at the emulator's speed: each series model's env steps/s as a ratio of the bare
emulator's, both on all cores, side by side in one run.

    python benchmarks/mario_series.py [--seconds 120] [--steps 12288] [--rounds 2] [--procs 2]
                                      [--models ppo,dqn,icm,rnd,knn]

What runs, per round (the cases alternate, so a drifting machine load hits all alike):
  * emulator: ``--procs`` processes, each a bare gym-super-mario-bros ``SuperMarioBrosEnv`` stepped 4
    frames per agent step with random SIMPLE_MOVEMENT actions (no preprocessing, no learning): the
    ceiling every model shares;
  * each model: ``--procs`` processes, each training that model with the exact config the series gives
    it (experiments/mario-1-1.toml: its preset, 42x42 frames, one process per core, vector=sync, one
    torch thread), as the series runs two runs side by side.
A model's rate is counted after its first update (start-up and the first rollout excluded): ``--steps``
env steps (whole updates) per process, summed over its processes, each over its own wall time.

Targets: PPO and DQN >= 0.8x the emulator, ICM, RND and kNN >= 0.5x.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))
from _common import record  # noqa: E402  docs/BENCHMARKS.md's table (benchmarks/report.py)

EXPERIMENT = ROOT / "experiments" / "mario-1-1.toml"
SETTING = {"ppo": "game", "dqn": "game", "random": "none", "icm": "none", "rnd": "none", "knn": "none"}
TARGET = {"ppo": 0.8, "dqn": 0.8, "icm": 0.5, "rnd": 0.5, "knn": 0.5, "random": 0.8}


def emulator_worker(seconds: float, seed: int, out: mp.Queue) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import numpy as np
    from mario_env import bare_runner

    run, close = bare_runner(np.random.default_rng(seed).integers(0, 7, size=100_000))
    run(50)  # warm up
    start, steps = time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        run(50)
        steps += 50
    out.put({"steps": steps, "wall": time.perf_counter() - start})
    close()


def model_worker(algorithm: str, measured_steps: int, seed: int, run_dir: str, overrides: list[str],
                 out: mp.Queue) -> None:
    import rlf
    from rlf.experiments.spec import load_experiment

    experiment = load_experiment(EXPERIMENT, only=[f"{SETTING[algorithm]}/{algorithm}-seed0"], overrides=overrides)
    config = experiment.runs[0].config
    config["run"].update(run_dir=run_dir, progress=False, seed=seed, checkpoint_interval=10**9,
                         steps=10**9)
    algo = rlf.make(algorithm, experiment.env, config=config)
    run = config["run"]
    algo_config = config.get("algo", {})
    # one chunk = one update's worth of env steps (on-policy: a rollout; off-policy: 4,096 steps)
    chunk = int(algo_config.get("rollout_steps", 0)) * int(run.get("num_envs", 1)) or 4096
    algo.train(steps=chunk)  # start-up and the first update are not counted
    first_steps, first_wall = algo.counters["env_steps"], time.perf_counter()
    # whole updates only, and one train() call: a second one would restart the episodes once more
    algo.train(steps=first_steps + max(1, -(-measured_steps // chunk)) * chunk)
    out.put({"steps": algo.counters["env_steps"] - first_steps, "wall": time.perf_counter() - first_wall})


def measure(case: str, seconds: float, steps: int, procs: int, round_index: int, overrides: list[str]) -> float:
    """Env steps/s of ``procs`` processes of ``case`` running at once (summed)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="rlf-mario-series-") as tmp:
        workers = []
        for index in range(procs):
            seed = 1000 * round_index + index
            if case == "emulator":
                args = (seconds, seed, out)
                target = emulator_worker
            else:
                args = (case, steps, seed, os.path.join(tmp, f"run{index}"), overrides, out)
                target = model_worker
            workers.append(ctx.Process(target=target, args=args))
        for worker in workers:
            worker.start()
        results = []
        deadline = time.monotonic() + seconds * 20 + 3600
        while len(results) < len(workers):
            try:
                results.append(out.get(timeout=2))
            except queue.Empty:
                # a worker that died has said why on stderr; do not wait for it
                failed = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if failed or time.monotonic() > deadline:
                    for worker in workers:
                        worker.kill()
                    raise SystemExit(f"mario_series: error: a {case} worker "
                                     f"{'exited with ' + str(failed[0]) if failed else 'timed out'}; see above") from None
        for worker in workers:
            worker.join()
    return sum(r["steps"] / r["wall"] for r in results)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="measured seconds of the emulator per round")
    parser.add_argument("--steps", type=int, default=12_288,
                        help="measured env steps per model process and round (after its first update)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--procs", type=int, default=os.cpu_count() or 2, help="processes per case (one per core)")
    parser.add_argument("--models", default="ppo,dqn,icm,rnd,knn")
    parser.add_argument("--json", type=Path, help="also write the rates here")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="change every model's config (a smoke test: --set run.num_envs=1); not for results")
    args = parser.parse_args(argv)
    models = [m for m in args.models.split(",") if m]
    unknown = sorted(set(models) - set(SETTING))
    if unknown or args.seconds <= 0 or args.steps < 1 or args.rounds < 1 or args.procs < 1:
        print(f"mario_series: error: models must be among {', '.join(SETTING)} (got {unknown or 'ok'}); "
              "--seconds > 0, --steps, --rounds and --procs >= 1", file=sys.stderr)
        return 2
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} at start; {args.procs} processes per case, "
          f"{args.seconds:.0f} s x {args.rounds} rounds", flush=True)
    rates: dict[str, list[float]] = {case: [] for case in ["emulator", *models]}
    for round_index in range(args.rounds):
        for case in rates:
            rate = measure(case, args.seconds, args.steps, args.procs, round_index, args.overrides)
            rates[case].append(rate)
            print(f"round {round_index + 1} {case:<9} {rate:8.1f} env steps/s", flush=True)
    emulator = statistics.median(rates["emulator"])
    columns = ["case", f"env steps/s (median of {args.rounds})", "x emulator", "target"]
    rows = [["emulator only", f"{emulator:.1f}", "1.00", "-"]]
    for model in models:
        rate = statistics.median(rates[model])
        ratio = rate / emulator
        mark = "met" if ratio >= TARGET[model] else "missed"
        rows.append([f"{model} ({SETTING[model]})", f"{rate:.1f}", f"{ratio:.2f}", f">= {TARGET[model]} {mark}"])
    print("\n| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} at the end")
    record(f"The Mario series' models against the bare emulator, {args.procs} processes per case on "
           f"{os.cpu_count()} cores", f"medians of {args.rounds} rounds, the cases in turn; emulator {args.seconds:.0f} s, "
           f"each model {args.steps:,} env steps per process after its first update, at its series settings "
           "(experiments/mario-1-1.toml: 42x42, vector=sync, 1 torch thread)", columns, rows)
    if args.json:
        args.json.write_text(json.dumps({"rates": rates, "procs": args.procs, "seconds": args.seconds}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

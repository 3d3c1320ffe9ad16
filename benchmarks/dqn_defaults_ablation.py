"""Why rlf's DQN defaults learn less than the CartPole preset: one preset setting at a time on top of the
defaults, 50k env steps, several seeds, greedy evaluation at the end.

    python benchmarks/dqn_defaults_ablation.py                      # every variant, seeds 0-2
    python benchmarks/dqn_defaults_ablation.py --only defaults,explore --seeds 3
    python benchmarks/dqn_defaults_ablation.py --quick              # 2k steps, 1 seed: does it run?

Each run is the same as ``rlf train dqn --env gym:CartPole-v1 --steps 50000 --seed S --set KEY=VALUE ...``
followed by ``rlf eval RUN --episodes 10`` (greedy), done in one fresh child process per run so that torch
is imported once. Rounds go seed by seed (every variant with seed 0, then seed 1, ...), so a partial run
already compares every variant. Not part of CI: a full run is 18 trainings of a minute or more each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _common import Case, UsageError, machine_line, main_guard, serve_worker  # noqa: E402
from dqn_cartpole import run_rounds  # noqa: E402

# the preset's settings (plugins/dqn/src/rlf_plugin_dqn/presets/cartpole.toml), grouped as the differences to the defaults
VARIANTS: dict[str, tuple[str, list[str]]] = {
    "defaults": ("rlf's defaults", []),
    "burst": ("+ 128 gradient steps every 256 env steps",
              ["algo.train_frequency=256", "algo.gradient_steps=128"]),
    "target": ("+ target sync every 128 optimizer steps", ["algo.target_update_interval=128"]),
    "explore": ("+ epsilon linear 1 -> 0.04 over 8k env steps",
                ["algo.exploration.schedule='per_step'", "algo.exploration.end=0.04",
                 "algo.exploration.decay_steps=8000"]),
    "net": ("+ 256x256 MLP, lr 2.3e-3", ["algo.hidden_sizes=[256, 256]", "algo.lr=0.0023"]),
    "plain": ("+ plain DQN target (no double DQN)", ["algo.double_dqn=false"]),
}


def rlf_worker(seed: int, threads: int, args: dict) -> dict:
    import torch  # noqa: F401  outside the timer, as in the peer scripts

    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("dqn", "gym:CartPole-v1", overrides=[
            f"steps={args['steps']}", f"seed={seed}", "progress=false", "checkpoint_interval=0",
            f"log_interval={args['steps']}", f"run_dir='{run_dir}'", f"algo.torch_threads={threads}",
            *args["overrides"]])
        start, cpu = time.perf_counter(), time.process_time()
        algo.train()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        evaluation = algo.evaluate(episodes=args["eval_episodes"])
    return {"eval": float(evaluation["return"]), "cpu_seconds": cpu, "seconds": seconds}


def main() -> None:
    if serve_worker({"rlf": rlf_worker}):
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (or from --seed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--only", default=",".join(VARIANTS), help=f"comma-separated subset of {', '.join(VARIANTS)}")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per run before it counts as failed")
    parser.add_argument("--jobs", type=int, default=1, help="trainings at once (the results do not depend on it)")
    parser.add_argument("--quick", action="store_true", help="2,000 steps, 1 seed, 1 eval episode: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.seeds, args.eval_episodes = 2_000, 1, 1
    names = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in names if name not in VARIANTS]
    if unknown or not names:
        raise UsageError(f"--only: unknown variant(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(VARIANTS)}")
    if args.steps < 1 or args.seeds < 1 or args.eval_episodes < 1 or args.jobs < 1:
        raise UsageError("--steps, --seeds, --eval-episodes and --jobs must be at least 1")
    cases = [Case(VARIANTS[name][0], sys.executable, "rlf",
                  {"steps": args.steps, "eval_episodes": args.eval_episodes, "overrides": VARIANTS[name][1]})
             for name in names]
    started = machine_line()
    print(started)
    print(f"DQN CartPole-v1 defaults ablation: {args.steps} env steps, seeds {args.seed}..{args.seed + args.seeds - 1}, "
          f"greedy eval {args.eval_episodes} episodes", flush=True)
    results = run_rounds(Path(__file__), cases, args.seeds, args.seed, args.timeout, args.jobs)
    print(f"\n{started}")
    print("| variant | --set | greedy eval per seed | seeds >= 475 | train CPU s per seed |")
    print("|---|---|---|---|---|")
    for case in cases:
        rows = results[case.name]
        sets = " ".join(f"`{o}`" for o in case.args["overrides"]) or "(none)"
        evals = ", ".join(f"{r['eval']:.0f}" for r in rows)
        cpus = ", ".join(f"{r['cpu_seconds']:.0f}" for r in rows)
        passed = sum(r["eval"] >= 475 for r in rows)
        print(f"| {case.name} | {sets} | {evals} | {passed}/{len(rows)} | {cpus} |")


if __name__ == "__main__":
    main_guard(main)

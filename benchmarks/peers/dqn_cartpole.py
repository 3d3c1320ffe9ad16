"""DQN on CartPole-v1: Stable-Baselines3 at rl-baselines3-zoo's tuned settings vs rlf at the same
settings (plugins/dqn/src/rlf_plugin_dqn/presets/cartpole.toml) and, optionally, rlf's defaults. Same budget, same seeds,
alternating rounds, each run in a fresh process.

    python benchmarks/peers/dqn_cartpole.py                       # 50k steps, 3 rounds (seeds 0, 1, 2)
    python benchmarks/peers/dqn_cartpole.py --with-defaults       # also rlf's default DQN settings
    python benchmarks/peers/dqn_cartpole.py --quick               # 2k steps, 1 round: does it run?

Run it with rlf's interpreter (the dev venv: `bash scripts/dev_env.sh`); SB3 runs in its own venv, made
once with (nothing here installs anything):

    python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3

Reported per case: env steps/s from building the model to the end of training (SB3: ``DQN(...)`` plus
``learn()``; rlf: ``train()``, torch imported before the timer on both sides), and the mean return of greedy
evaluation episodes after training, per seed (CartPole's maximum is 500).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    REPO,
    Case,
    UsageError,
    alternate,
    check_python,
    machine_line,
    main_guard,
    median,
    print_table,
    run_case,
    serve_worker,
    thread_mismatch,
)

PRESET = REPO / "plugins" / "dqn" / "src" / "rlf_plugin_dqn" / "presets" / "cartpole.toml"
SB3_VENV = "python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3"

# rl-baselines3-zoo, hyperparams/dqn.yml, CartPole-v1 (n_timesteps 5e4)
ZOO = {"learning_rate": 2.3e-3, "batch_size": 64, "buffer_size": 100_000, "learning_starts": 1000, "gamma": 0.99,
       "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128, "exploration_fraction": 0.16,
       "exploration_final_eps": 0.04, "policy_kwargs": {"net_arch": [256, 256]}}


def sb3_worker(seed: int, threads: int, args: dict) -> dict:
    import torch

    torch.set_num_threads(threads)  # first, before SB3 can start a thread pool
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import DQN

    start, cpu = time.perf_counter(), time.process_time()  # model construction inside the timer, as in rlf's train()
    model = DQN("MlpPolicy", gym.make("CartPole-v1"), seed=seed, device="cpu", verbose=0, **ZOO)
    model.learn(total_timesteps=args["steps"])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    env = gym.make("CartPole-v1")
    returns = []
    for episode in range(args["eval_episodes"]):
        obs, _ = env.reset(seed=seed + 1_000_003 + episode)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return {"steps_per_second": args["steps"] / seconds, "seconds": seconds,
            "steps_per_cpu_second": args["steps"] / cpu, "eval": float(np.mean(returns))}


def rlf_overrides(seed: int, threads: int, args: dict, run_dir: str) -> list[str]:
    """rlf's settings for one run (on top of the preset file, if any), threads last so that they win."""
    return [f"steps={args['steps']}", f"seed={seed}", "progress=false", "checkpoint_interval=0",
            f"log_interval={args['steps']}", f"run_dir='{run_dir}'", f"algo.torch_threads={threads}"]


def rlf_worker(seed: int, threads: int, args: dict) -> dict:
    import torch  # noqa: F401  imported before the timer, as in the SB3 worker (rlf imports it lazily in train())

    import rlf

    preset = args.get("preset")
    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("dqn", "gym:CartPole-v1", config_file=preset,
                        overrides=rlf_overrides(seed, threads, args, run_dir))
        start, cpu = time.perf_counter(), time.process_time()
        algo.train()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        evaluation = algo.evaluate(episodes=args["eval_episodes"])
    return {"steps_per_second": args["steps"] / seconds, "seconds": seconds,
            "steps_per_cpu_second": args["steps"] / cpu, "eval": float(evaluation["return"])}


WORKERS = {"sb3": sb3_worker, "rlf": rlf_worker}


def run_rounds(script: Path, cases: list[Case], rounds: int, seed: int, timeout: float,
               jobs: int) -> dict[str, list[dict]]:
    """``alternate`` (one run at a time) when ``jobs`` is 1; else every (case, seed) run at once, at
    most ``jobs`` processes together, each case as often as the other at every moment: on a machine
    whose load would stretch sequential rounds past the session, the CPU-time ratio stays fair."""
    if jobs <= 1:
        return alternate(script, cases, rounds, seed, timeout)
    if thread_mismatch(cases):
        raise UsageError(thread_mismatch(cases))
    runs = [(case, seed + r) for r in range(rounds) for case in (cases if r % 2 == 0 else cases[::-1])]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_case, script, case, s, timeout) for case, s in runs]
        done = [future.result() for future in futures]
    results: dict[str, list[dict]] = {case.name: [] for case in cases}
    for (case, s), result in sorted(zip(runs, done, strict=True), key=lambda item: item[0][1]):
        results[case.name].append(result)
        shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in result.items() if not isinstance(v, (list, dict)))
        print(f"  seed {s}  {case.name:34s} {shown}", flush=True)
    return results


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds = seeds (seed, seed+1, ...)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of every case (SB3 is fastest at 1)")
    parser.add_argument("--with-defaults", action="store_true", help="also run rlf's default DQN settings")
    parser.add_argument("--sb3-python", default=os.environ.get("SB3_PYTHON", "/tmp/sb3/bin/python"))
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it counts as failed")
    parser.add_argument("--ratio", choices=("wall", "cpu"), default="wall",
                        help="rlf/peer of env steps per wall second, or per CPU second of the run's process "
                             "(steadier on a loaded machine; with 1 torch thread)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="runs at once (1: alternating rounds, the fair wall-time comparison; more: only "
                             "for --ratio cpu on a machine too loaded for sequential rounds)")
    parser.add_argument("--quick", action="store_true", help="2,000 steps, 1 round, 1 eval episode: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.rounds, args.eval_episodes = 2_000, 1, 1
    if min(args.steps, args.rounds, args.eval_episodes, args.jobs, args.threads) < 1:
        raise UsageError("--steps, --rounds, --eval-episodes, --jobs and --threads must be at least 1")
    return args


def comparisons(args: argparse.Namespace, peer_python: str) -> dict[str, list[Case]]:
    """The compared sides, by comparison: one thread count (``--threads``) for all of them."""
    sb3 = peer_python
    common = {"steps": args.steps, "eval_episodes": args.eval_episodes}
    cases = [Case("SB3 DQN, rl-zoo settings", sb3, "sb3", common, args.threads, peer=True),
             Case("rlf DQN, its CartPole preset", sys.executable, "rlf", {**common, "preset": str(PRESET)},
                  args.threads)]
    if args.with_defaults:
        cases.append(Case("rlf DQN, default settings", sys.executable, "rlf", common, args.threads))
    return {"rl-zoo settings": cases}


def main() -> None:
    if serve_worker(WORKERS):
        return
    args = arguments()
    sb3 = check_python(args.sb3_python, "stable_baselines3", SB3_VENV)
    cases = comparisons(args, sb3)["rl-zoo settings"]
    started = machine_line()
    print(started)
    print(f"DQN CartPole-v1: {args.steps} env steps per run, {args.rounds} rounds (seeds {args.seed}.."
          f"{args.seed + args.rounds - 1}), torch threads {args.threads}, greedy eval {args.eval_episodes} episodes, "
          f"{args.jobs} run(s) at once",
          flush=True)
    results = run_rounds(Path(__file__), cases, args.rounds, args.seed, args.timeout, args.jobs)
    peer_rows = results[cases[0].name]

    def ratio(key: str) -> Callable[[list[dict]], str]:
        # both ratios side by side: wall time is what users wait for, CPU time is what survives the load
        def render(rows: list[dict]) -> str:
            if rows is peer_rows:
                return ""
            return f"{median([r[key] for r in rows]) / median([r[key] for r in peer_rows]):.2f}x"
        return render

    print_table(
        "DQN CartPole-v1", [
            ("env steps/s per seed", lambda rows: ", ".join(f"{r['steps_per_second']:,.0f}" for r in rows)),
            ("env steps/s (median)", lambda rows: f"{median([r['steps_per_second'] for r in rows]):,.0f}"),
            ("env steps per CPU second (median)",
             lambda rows: f"{median([r['steps_per_cpu_second'] for r in rows]):,.0f}"),
            ("rlf/peer wall", ratio("steps_per_second")),
            ("rlf/peer CPU", ratio("steps_per_cpu_second")),
            ("greedy eval per seed", lambda rows: ", ".join(f"{r['eval']:.0f}" for r in rows)),
            ("seeds >= 475", lambda rows: f"{sum(r['eval'] >= 475 for r in rows)}/{len(rows)}"),
        ], results, cases, "steps_per_second" if args.ratio == "wall" else "steps_per_cpu_second",
        f"{args.steps} env steps, {started}; load at the end {os.getloadavg()[0]:.1f}; last column: --ratio {args.ratio}")


if __name__ == "__main__":
    main_guard(main)

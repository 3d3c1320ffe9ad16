"""SAC on Pendulum-v1: does rlf-plugin-sac reach a mean return of -250 within 20,000 env steps, and
how does it compare with Stable-Baselines3's SAC at the same settings?

Per seed and implementation: training wall time, env steps/s and env steps per CPU second over the
whole run (acting and the one gradient step per env step together; SB3: ``SAC(...)`` and ``learn()``,
rlf: ``train()``, which builds its agent; torch imported before the timer on both sides), the load,
and the mean greedy return over ``--episodes`` evaluation episodes on fixed evaluation seeds (the same
episodes for both implementations). Every run is a fresh process (neither side pays the other's first
import of torch) and the order flips each round (rlf seed 0, sb3 seed 0, sb3 seed 1, rlf seed 1, ...)
so load on the machine hits both alike; the summary gives medians and the rlf/sb3 ratios.

    python benchmarks/sac_pendulum.py                      # rlf only, 3 seeds x 20k steps
    python benchmarks/sac_pendulum.py --impl both          # SB3 from --sb3-python (default /tmp/sb3/bin/python)

Run it with rlf's interpreter. This script installs nothing. SB3 lives in its own venv, made once with:

    python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3

Both sides: torch on one thread, CPU, ReLU MLPs (``--hidden``, default [256, 256]), Adam, lr 3e-4 for
policy, critics and temperature (``--lr`` changes all three), batch 256, buffer 1e6, 100 uniformly random steps first,
one gradient step per env step, tau 0.005, gamma 0.99, entropy temperature tuned from 1.0 towards
-dim(A).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _common import (  # noqa: E402
    Case,
    UsageError,
    alternate,
    check_python,
    evaluate_policy,
    machine_line,
    main_guard,
    print_table,
    serve_worker,
)

SB3_VENV = "python3 -m venv /tmp/sb3 && /tmp/sb3/bin/pip install -c constraints.txt torch==2.13.0 stable-baselines3"
ENV_ID = "Pendulum-v1"
EVAL_SEED = 10_000
THRESHOLD = -250.0


def evaluate(policy: Callable, episodes: int) -> float:
    """Mean return of ``policy`` (one observation -> one action) over fixed evaluation seeds."""
    return evaluate_policy(policy, ENV_ID, episodes, EVAL_SEED)


def rlf_overrides(seed: int, threads: int, args: dict, run_dir: str) -> list[str]:
    lr = args["lr"]
    return [f"seed={seed}", "progress=false", "checkpoint_interval=0", f"run_dir='{run_dir}'",
            f"algo.actor_lr={lr}", f"algo.critic_lr={lr}", f"algo.alpha_lr={lr}", f"algo.hidden_sizes={args['hidden']}",
            f"algo.torch_threads={threads}"]


def run_rlf(seed: int, threads: int, args: dict) -> dict[str, float]:
    import torch  # noqa: F401  imported before the timer, as in the SB3 worker (rlf imports it lazily in train())

    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("sac", f"gym:{ENV_ID}", overrides=rlf_overrides(seed, threads, args, run_dir))
        start, cpu = time.perf_counter(), time.process_time()
        algo.train(steps=args["steps"])
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        agent = algo.strategy.agent
        result = evaluate(lambda obs: agent.act({"agent": obs[None]}, explore=False).actions["agent"][0],
                          args["episodes"])
    return {"seconds": seconds, "steps_per_s": args["steps"] / seconds, "steps_per_cpu_s": args["steps"] / cpu,
            "return": result}


def run_sb3(seed: int, threads: int, args: dict) -> dict[str, float]:
    import torch

    torch.set_num_threads(threads)  # first, before SB3 can start a thread pool
    import gymnasium
    from stable_baselines3 import SAC

    start, cpu = time.perf_counter(), time.process_time()  # model construction inside the timer, as rlf's train()
    env = gymnasium.make(ENV_ID)
    model = SAC("MlpPolicy", env, learning_rate=args["lr"], buffer_size=1_000_000, learning_starts=100,
                batch_size=256, tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, ent_coef="auto_1.0",
                policy_kwargs={"net_arch": list(args["hidden"])}, seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=args["steps"])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    result = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], args["episodes"])
    env.close()
    return {"seconds": seconds, "steps_per_s": args["steps"] / seconds, "steps_per_cpu_s": args["steps"] / cpu,
            "return": result}


WORKERS = {"rlf": run_rlf, "sb3": run_sb3}


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=("rlf", "sb3", "both"), default="rlf")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lr", type=float, default=3e-4, help="policy, critic and temperature learning rate")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256], help="hidden widths of every MLP")
    parser.add_argument("--episodes", type=int, default=10, help="greedy evaluation episodes per run")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both sides (default 1)")
    parser.add_argument("--sb3-python", default="/tmp/sb3/bin/python", help="SB3's interpreter (--impl sb3/both)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one run may take")
    args = parser.parse_args(argv)
    if min(args.steps, args.episodes, args.threads) < 1 or not args.seeds:
        raise UsageError("--steps, --episodes and --threads must be at least 1, with at least one seed")
    if args.seeds != list(range(args.seeds[0], args.seeds[0] + len(args.seeds))):
        raise UsageError("--seeds must be consecutive (rounds run seeds s, s+1, ...), e.g. --seeds 0 1 2")
    return args


def comparisons(args: argparse.Namespace, peer_python: str) -> dict[str, list[Case]]:
    """The sides to run, one thread count (``--threads``) for both."""
    common = {"steps": args.steps, "lr": args.lr, "hidden": args.hidden, "episodes": args.episodes}
    cases = {"sb3": Case("sb3", peer_python, "sb3", common, args.threads, peer=True),
             "rlf": Case("rlf", sys.executable, "rlf", common, args.threads)}
    impls = ("rlf", "sb3") if args.impl == "both" else (args.impl,)
    return {ENV_ID: [cases[impl] for impl in impls]}


def main() -> None:
    if serve_worker(WORKERS):
        return
    args = arguments()
    sb3 = check_python(args.sb3_python, "stable_baselines3", SB3_VENV) if args.impl != "rlf" else ""
    cases = comparisons(args, sb3)[ENV_ID]
    print(f"# {ENV_ID}, {args.steps} env steps, seeds {args.seeds}, lr {args.lr}, hidden {args.hidden}, "
          f"{args.episodes} greedy eval episodes, torch threads {args.threads} on both sides")
    print(f"# {machine_line()}")
    results = alternate(Path(__file__), cases, len(args.seeds), args.seeds[0], args.timeout)
    def med(key: str, fmt: str):
        return lambda rows: fmt.format(statistics.median(r[key] for r in rows))

    print_table(f"SAC {ENV_ID}, {args.steps:,} env steps", [
        ("env steps/s", med("steps_per_s", "{:.1f}")), ("env steps per CPU s", med("steps_per_cpu_s", "{:.1f}")),
        ("greedy return (median)", med("return", "{:.1f}")),
        (f"seeds >= {THRESHOLD:.0f}", lambda rows: f"{sum(r['return'] >= THRESHOLD for r in rows)}/{len(rows)}")],
        results, cases, "steps_per_s",
        f"medians over seeds {args.seeds}; rlf/peer = env steps/s (wall) over SB3's; {machine_line()}")
    if len(cases) == 2:
        for key, label in (("steps_per_s", "steps/s"), ("steps_per_cpu_s", "steps per CPU s")):
            ratio = statistics.median(r[key] for r in results["rlf"]) / statistics.median(
                r[key] for r in results["sb3"])
            print(f"rlf/sb3 {label} ratio: {ratio:.2f}")

if __name__ == "__main__":
    main_guard(main)

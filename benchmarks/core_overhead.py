"""Core speed: `rlf list` start-up time and the training loop's own overhead.

    python benchmarks/core_overhead.py [--steps 200000] [--rounds 3]

Prints (1) the median wall time of `rlf list` with every installed plugin (target < 0.5 s) next
to a bare `python -c pass`, and (2) env steps/s of `rlf train random --env gym:CartPole-v1`
(its defaults: 16 in-process envs, CSV + TensorBoard + progress bar) against a bare Gymnasium loop
with random actions, alternated in one run; the ratio must stay >= 0.8.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time


def time_command(command: list[str], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bare_loop(steps: int) -> float:
    import gymnasium

    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    return steps / (time.perf_counter() - start)


def rlf_loop(steps: int, progress: bool) -> float:
    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("random", "gym:CartPole-v1",
                        overrides=[f"steps={steps}", f"run_dir='{run_dir}'", f"progress={str(progress).lower()}"])
        start = time.perf_counter()
        algo.train()
        return steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rlf_bin = [sys.executable, "-m", "rlf.cli.commands", "list"]
    listed = time_command(rlf_bin, args.rounds + 2)
    python = time_command([sys.executable, "-c", "pass"], args.rounds + 2)
    print(f"rlf list: {listed:.3f} s median (bare python start-up {python:.3f} s); target < 0.5 s")

    bare, ours = [], []
    for _ in range(args.rounds):
        bare.append(bare_loop(args.steps))
        ours.append(rlf_loop(args.steps, progress=True))
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"bare gymnasium loop, random actions: {b:,.0f} env steps/s")
    print(f"rlf train random (its default 16 envs, CSV + TensorBoard + progress): {o:,.0f} env steps/s")
    print(f"ratio rlf / bare: {o / b:.2f} (target >= 0.8)")


if __name__ == "__main__":
    main()

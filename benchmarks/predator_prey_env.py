"""Predator-prey env speed and random baselines.

    python benchmarks/predator_prey_env.py [--steps 50000] [--episodes 1000] [--rounds 3] [--seed 0]

Prints, side by side for chase-1v1, grid-3v3 and sparse-10x10: env steps/s when every learning agent
acts uniformly at random against the scenario's scripted (random) opponents (actions drawn before
timing, resets included), then the random capture rate, mean steps to capture and mean episode length
over ``--episodes`` episodes. The sparse-10x10 row is the baseline other plugins' learning tests
compare against. A few variants follow, timed only: both teams learning, the local view, and a 32x32
grid with 307 obstacles (the per-step cost does not grow with the obstacle count).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from rlf_plugin_predator_prey import capture_summary, parallel_env, random_play

SCENARIOS = [
    ("chase-1v1", {"scenario": "chase-1v1"}),
    ("grid-3v3", {"scenario": "grid-3v3"}),
    ("sparse-10x10", {"scenario": "sparse-10x10"}),
]
SPEED_ONLY = [  # variants timed only
    ("grid-3v3 learners=all", {"scenario": "grid-3v3", "learners": "all"}),
    ("grid-3v3 local view", {"scenario": "grid-3v3", "observation": "local"}),
    ("32x32 3v3 30% obstacles", {"scenario": "grid-3v3", "size": 32, "obstacle_share": 0.3, "max_steps": 500}),
]


def steps_per_second(fields: dict, steps: int, seed: int, rounds: int) -> tuple[float, float]:
    """(wall, CPU) steps per second, each the best of ``rounds`` timings (the least disturbed by other
    processes; CPU time stays meaningful on a loaded machine where wall time does not)."""
    timings = [_time_steps(fields, steps, seed) for _ in range(rounds)]
    return max(t[0] for t in timings), max(t[1] for t in timings)


def _time_steps(fields: dict, steps: int, seed: int) -> tuple[float, float]:
    env = parallel_env(**fields)
    actions = np.random.default_rng(seed).integers(5, size=(steps, len(env.possible_agents))).tolist()
    names = env.possible_agents
    env.reset(seed=seed)
    start, cpu = time.perf_counter(), time.process_time()
    for row in actions:
        present = env.agents
        env.step({a: row[k] for k, a in enumerate(names) if a in present})
        if not env.agents:
            env.reset()
    return steps / (time.perf_counter() - start), steps / (time.process_time() - cpu)


def random_baseline(fields: dict, episodes: int, seed: int) -> tuple[float, float, float]:
    """(capture rate, mean steps to capture over captured episodes, mean episode length)."""
    summary = capture_summary(random_play(fields, episodes, seed))
    return summary["capture"], summary["steps_to_capture"], summary["length"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50_000, help="timed env steps per case")
    parser.add_argument("--episodes", type=int, default=1000, help="episodes for the random baselines")
    parser.add_argument("--rounds", type=int, default=3, help="timings per case; the best is printed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(f"{'case':<26} {'steps/s':>9} {'cpu steps/s':>12} {'capture':>8} {'to capture':>11} {'length':>7}")
    for name, fields in SCENARIOS:
        wall, cpu = steps_per_second(fields, args.steps, args.seed, args.rounds)
        rate, to_capture, length = random_baseline(fields, args.episodes, args.seed)
        print(f"{name:<26} {wall:>9,.0f} {cpu:>12,.0f} {rate:>8.3f} {to_capture:>11.1f} {length:>7.1f}", flush=True)
    for name, fields in SPEED_ONLY:
        wall, cpu = steps_per_second(fields, args.steps, args.seed, args.rounds)
        print(f"{name:<26} {wall:>9,.0f} {cpu:>12,.0f} {'-':>8} {'-':>11} {'-':>7}", flush=True)
    print(f"(random play, {args.episodes} episodes each; 'to capture' = mean decisions to the capture "
          "threshold over the episodes that reached it)")


if __name__ == "__main__":
    main()

"""Subprocess env workers: rlf's per-worker stepping against Gymnasium's group stepping.

    python benchmarks/env_workers.py                     # CartPole, 4 workers, 7 alternating rounds
    python benchmarks/env_workers.py --env MountainCar-v0 --workers 8 --rounds 9 --seconds 2

``GymVector`` sends each worker its command and reads each answer itself (so one lost worker can be
replaced without losing its siblings' answers, see core/rlf/envs.py); before, it called Gymnasium's
``AsyncVectorEnv.step_async`` / ``step_wait`` per group. Both paths run here on the same worker
processes, in alternating rounds, and build the same ``StepBatch``; the medians and their ratio are
printed. CartPole steps in microseconds, so this is the worst case for any per-step overhead.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rlf.builtin_envs import GymEnvConfig
from rlf.envs import EnvFactory, GymVector
from rlf.interfaces import SINGLE_AGENT
from rlf.plugins import LazyCallable


def per_worker(vector: GymVector, actions: np.ndarray) -> None:
    vector.step({SINGLE_AGENT: actions})


def gymnasium_groups(vector: GymVector, actions: np.ndarray) -> None:
    """What GymVector.step did before: Gymnasium's own group calls, then the same StepBatch."""
    for index, part in enumerate(vector.parts):
        vector.groups[index].step_async(actions[part])
    for index, group in enumerate(vector.groups):
        vector._batch(index, *group.step_wait(timeout=vector.supervision.timeout))


def rate(step, vector: GymVector, seconds: float, rng: np.random.Generator) -> float:
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step(vector, rng.integers(0, 2, vector.num_envs))
        steps += vector.num_envs
    return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    factory = EnvFactory(LazyCallable("rlf.builtin_envs:make_gym_env"), GymEnvConfig(id=args.env))
    vector = GymVector(f"gym:{args.env}", factory, args.workers, subprocess=True)
    rng = np.random.default_rng(0)
    try:
        vector.reset(seed=0)
        rate(per_worker, vector, 0.5, rng)  # warm up both paths
        rate(gymnasium_groups, vector, 0.5, rng)
        results: dict[str, list[float]] = {"per-worker (rlf)": [], "Gymnasium groups": []}
        for round_ in range(args.rounds):
            order = [per_worker, gymnasium_groups] if round_ % 2 == 0 else [gymnasium_groups, per_worker]
            for step in order:
                name = "per-worker (rlf)" if step is per_worker else "Gymnasium groups"
                results[name].append(rate(step, vector, args.seconds, rng))
    finally:
        vector.close()
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"{args.env}, {args.workers} subprocess workers in {len(vector.parts)} groups, {args.rounds} alternating "
          f"rounds of {args.seconds:g} s (env steps/s)")
    for name, values in results.items():
        print(f"  {name:18s} median {medians[name]:9.0f}   rounds {' '.join(f'{v:.0f}' for v in values)}")
    print(f"  per-worker / Gymnasium groups: {medians['per-worker (rlf)'] / medians['Gymnasium groups']:.3f}x")


if __name__ == "__main__":
    main()

"""Subprocess env workers: rlf's per-worker stepping against Gymnasium's group stepping.

    python benchmarks/env_workers.py                     # CartPole, 4 workers, 7 alternating rounds
    python benchmarks/env_workers.py --env MountainCar-v0 --workers 8 --rounds 9 --seconds 2

``GymVector`` sends each worker its command and reads each answer itself (so one lost worker can be
replaced without losing its siblings' answers, see core/rlf/envs/); before, it called Gymnasium's
``AsyncVectorEnv.step_async`` / ``step_wait`` per group. Both paths run here on the same worker
processes, in alternating rounds, and build the same ``StepBatch``; the medians and their ratio are
printed. CartPole steps in microseconds, so this is the worst case for any per-step overhead.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rlf.envs import EnvFactory, GymVector, StepBatch
from rlf.envs.gym import GymEnvConfig
from rlf.interfaces import SINGLE_AGENT
from rlf.plugins import LazyCallable


def per_worker(vector: GymVector, actions: np.ndarray) -> None:
    vector.step({SINGLE_AGENT: actions})


def gymnasium_groups(vector: GymVector, actions: np.ndarray) -> None:
    """What GymVector.step did before: the same action check, Gymnasium's own group calls, then the
    same StepBatch per group, joined."""
    vector._check_actions({SINGLE_AGENT: actions}, vector.num_envs)
    for index, part in enumerate(vector.parts):
        vector.groups[index].step_async(actions[part])
    StepBatch.concat([vector._batch(index, *group.step_wait(timeout=vector.supervision.timeout))
                      for index, group in enumerate(vector.groups)])


def rate(step, vector: GymVector, seconds: float, rng: np.random.Generator) -> tuple[float, float]:
    """(env steps per second, this process's CPU microseconds per env step): on a loaded machine the
    second is the steadier measure of what the stepping code itself costs."""
    steps, start, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - start) < seconds:
        step(vector, rng.integers(0, 2, vector.num_envs))
        steps += vector.num_envs
    return steps / elapsed, (time.process_time() - cpu) / steps * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=1.5)
    args = parser.parse_args()
    factory = EnvFactory(LazyCallable("rlf.envs.gym:make_gym_env"), GymEnvConfig(id=args.env))
    vector = GymVector(f"gym:{args.env}", factory, args.workers, subprocess=True)
    rng = np.random.default_rng(0)
    try:
        vector.reset(seed=0)
        rate(per_worker, vector, 0.5, rng)  # warm up both paths
        rate(gymnasium_groups, vector, 0.5, rng)
        results: dict[str, list[tuple[float, float]]] = {"per-worker (rlf)": [], "Gymnasium groups": []}
        for round_ in range(args.rounds):
            order = [per_worker, gymnasium_groups] if round_ % 2 == 0 else [gymnasium_groups, per_worker]
            for step in order:
                name = "per-worker (rlf)" if step is per_worker else "Gymnasium groups"
                results[name].append(rate(step, vector, args.seconds, rng))
    finally:
        vector.close()
    print(f"{args.env}, {args.workers} subprocess workers in {len(vector.parts)} groups, {args.rounds} alternating "
          f"rounds of {args.seconds:g} s")
    medians = {}
    for name, values in results.items():
        medians[name] = (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
        print(f"  {name:18s} median {medians[name][0]:8.0f} env steps/s, {medians[name][1]:6.1f} CPU us/step here"
              f"   (rounds: {' '.join(f'{v[0]:.0f}' for v in values)} steps/s)")
    ours, theirs = medians["per-worker (rlf)"], medians["Gymnasium groups"]
    print(f"  per-worker / Gymnasium groups: throughput {ours[0] / theirs[0]:.3f}x, CPU per step {ours[1] / theirs[1]:.3f}x")


if __name__ == "__main__":
    main()

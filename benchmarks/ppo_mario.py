"""PPO on Mario: rollout collection speed against the same vector env stepped with random actions,
side by side in one run, and the split of wall time between env stepping, inference and learning.

    python benchmarks/ppo_mario.py [--num-envs 8] [--steps 2048] [--rollout-steps 64] [--rounds 2]

Both use subprocess envs (Gymnasium AsyncVectorEnv groups with shared memory, what `vector=auto`
picks for Mario) and PPO's default 8 envs. The rounds alternate (random, PPO, random, PPO...), so
drifting load on a shared machine hits both alike; each round prints its own ratio.

collection steps/s = env steps / (wall - learning - setup - checkpoint): everything PPO adds while
collecting (inference, the core's rollout bookkeeping, GAE, logging) counts against it. Target:
>= 0.95x the random-action rate. The split is of the main process's wall time: env = waiting for the
env workers (step, step_async, step_wait), inference = the agent's act and value. With subprocess
envs the strategy acts on one env group while the other steps, so inference overlaps env stepping.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
from ppo_cartpole import Timers, timed_registry

import rlf
from rlf.envs import EnvFactory, GymVector, make_vector_env
from rlf.training.on_policy import OnPolicyStrategy
from rlf.training.trainer import Trainer

SPLIT = ("setup", "env", "inference", "learning", "checkpoint")


def random_actions(num_envs: int, steps: int) -> float:
    spec = rlf.registry().environment("mario")
    envs = make_vector_env("mario", EnvFactory(spec.build_env, spec.config()), num_envs, subprocess=True)
    try:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        n_actions = envs.spec.action_spaces[rlf.SINGLE_AGENT].n
        start = time.perf_counter()
        for _ in range(steps // num_envs):
            envs.step({rlf.SINGLE_AGENT: rng.integers(0, n_actions, size=num_envs)})
        return steps / (time.perf_counter() - start)
    finally:
        envs.close()


def ppo(num_envs: int, steps: int, rollout_steps: int, overrides: list[str]) -> dict[str, float]:
    timers = Timers()
    patched = [(GymVector, "step", "env"), (GymVector, "step_async", "env"), (GymVector, "step_wait", "env"),
               (OnPolicyStrategy, "setup", "setup"), (OnPolicyStrategy, "teardown", "setup"),
               (Trainer, "checkpoint", "checkpoint")]
    saved = [(cls, attribute, getattr(cls, attribute)) for cls, attribute, _ in patched]
    for cls, attribute, name in patched:
        setattr(cls, attribute, timers.wrap(name, getattr(cls, attribute)))
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            algo = rlf.make("ppo", "mario", registry=timed_registry(timers), overrides=[
                f"steps={steps}", f"num_envs={num_envs}", "vector='async'", f"algo.rollout_steps={rollout_steps}",
                "progress=false", "checkpoint_interval=0", f"run_dir='{run_dir}'", *overrides])
            start = time.perf_counter()
            algo.train()
            wall = time.perf_counter() - start
    finally:
        for cls, attribute, original in saved:
            setattr(cls, attribute, original)
    split = {name: timers.seconds[name] for name in SPLIT}
    split["other"] = wall - sum(split.values())
    collecting = wall - split["learning"] - split["setup"] - split["checkpoint"]
    return {"wall": wall, "collection_steps_per_second": steps / collecting, **split}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=2048)
    parser.add_argument("--rollout-steps", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra PPO config override, as for `rlf train --set` (repeatable)")
    args = parser.parse_args()
    ratios = []
    for round_number in range(1, args.rounds + 1):
        baseline = random_actions(args.num_envs, args.steps)
        result = ppo(args.num_envs, args.steps, args.rollout_steps, args.set)
        ratios.append(result["collection_steps_per_second"] / baseline)
        wall = result["wall"]
        print(f"round {round_number}: random actions {baseline:6.1f} env steps/s, PPO collection "
              f"{result['collection_steps_per_second']:6.1f} env steps/s: ratio {ratios[-1]:.2f}\n"
              "  PPO wall time: " + "  ".join(f"{name} {result[name]:.1f}s ({100 * result[name] / wall:.0f}%)"
                                              for name in (*SPLIT, "other")), flush=True)
    print(f"{args.num_envs} subprocess envs, {args.steps} env steps per run: collection / random-action "
          f"stepping = {statistics.median(ratios):.2f} (median of {args.rounds}; target >= 0.95)")


if __name__ == "__main__":
    main()

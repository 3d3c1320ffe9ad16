"""PPO on Mario: rollout collection speed against the same vector env stepped with random actions,
side by side in one run, and the split of wall time between env stepping, inference and learning.

    python benchmarks/ppo_mario.py [--num-envs 2] [--steps 1024] [--rollout-steps 128]

Both use subprocess envs (Gymnasium AsyncVectorEnv with shared memory, what `vector=auto` picks for
Mario). collection steps/s = env steps / (wall - learning - setup): everything PPO adds while
collecting (inference, the core's rollout bookkeeping, GAE) counts against it. Target: >= 0.9x.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
from ppo_cartpole import Timers, timed_registry

import rlf
from rlf.envs import EnvFactory, GymVector, make_vector_env
from rlf.training.on_policy import OnPolicyStrategy


def random_actions(num_envs: int, steps: int) -> float:
    spec = rlf.registry().environment("mario")
    config = spec.config()
    envs = make_vector_env("mario", EnvFactory(spec.build_env, config), num_envs, subprocess=True)
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


def ppo(num_envs: int, steps: int, rollout_steps: int) -> dict[str, float]:
    timers = Timers()
    patched = [(GymVector, "step", "env"), (OnPolicyStrategy, "setup", "setup"),
               (OnPolicyStrategy, "teardown", "setup")]
    saved = [(cls, attribute, getattr(cls, attribute)) for cls, attribute, _ in patched]
    for cls, attribute, name in patched:
        setattr(cls, attribute, timers.wrap(name, getattr(cls, attribute)))
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            algo = rlf.make("ppo", "mario", registry=timed_registry(timers), overrides=[
                f"steps={steps}", f"num_envs={num_envs}", "vector='async'", f"algo.rollout_steps={rollout_steps}",
                "progress=false", "checkpoint_interval=0", f"run_dir='{run_dir}'"])
            start = time.perf_counter()
            algo.train()
            wall = time.perf_counter() - start
    finally:
        for cls, attribute, original in saved:
            setattr(cls, attribute, original)
    split = {name: timers.seconds[name] for name in ("setup", "env", "inference", "learning")}
    split["other"] = wall - sum(split.values())
    collecting = wall - split["learning"] - split["setup"]
    return {"wall": wall, "collection_steps_per_second": steps / collecting, **split}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1024)
    parser.add_argument("--rollout-steps", type=int, default=128)
    args = parser.parse_args()
    baseline = random_actions(args.num_envs, args.steps)
    result = ppo(args.num_envs, args.steps, args.rollout_steps)
    print(f"random actions, {args.num_envs} subprocess envs: {baseline:7.1f} env steps/s")
    print(f"PPO rollout collection:                {result['collection_steps_per_second']:7.1f} env steps/s "
          f"(ratio {result['collection_steps_per_second'] / baseline:.2f}, target >= 0.9)")
    wall = result["wall"]
    print("PPO wall time split: " + "  ".join(
        f"{name} {result[name]:.1f}s ({100 * result[name] / wall:.0f}%)"
        for name in ("setup", "env", "inference", "learning", "other")))


if __name__ == "__main__":
    main()

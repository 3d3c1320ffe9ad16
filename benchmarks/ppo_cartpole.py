"""PPO on CartPole-v1: env steps per second over whole training runs, and where the wall time goes.

    python benchmarks/ppo_cartpole.py                      # sync and async vector envs, 100k steps each
    python benchmarks/ppo_cartpole.py --steps 50000 --modes sync --set algo.torch_threads=2

Uses the tuned preset plugins/ppo/src/rlf_plugin_ppo/presets/cartpole.toml. The agent's act/value, the learner's learn
and the vector env's step are wrapped with timers, so the split is measured inside the real run:
env = stepping the vector env (for async: waiting on the worker processes), inference = act + value,
learning = learn, setup = building envs (spawning workers for async), networks and optimizer and
closing them, other = the core's rollout bookkeeping, GAE, episode stats, logging and the checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import rlf
from rlf.envs import GymVector, ParallelVector
from rlf.plugins import load_registry
from rlf.training.on_policy import OnPolicyStrategy

PRESET = Path(__file__).resolve().parents[1] / "plugins" / "ppo" / "src" / "rlf_plugin_ppo" / "presets" / "cartpole.toml"


class Timers:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, function):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
        return timed


def timed_registry(timers: Timers, extra_plugins=()):
    registry = load_registry(extra_plugins=list(extra_plugins))
    spec = registry.algorithms["ppo"]

    def build_agent(context):
        agent = spec.build_agent(context)
        agent.act = timers.wrap("inference", agent.act)
        agent.value = timers.wrap("inference", agent.value)
        return agent

    def build_learner(context, agent):
        learner = spec.build_learner(context, agent)
        learner.learn = timers.wrap("learning", learner.learn)
        return learner

    registry.algorithms["ppo"] = dataclasses.replace(spec, build_agent=build_agent, build_learner=build_learner)
    return registry


def run(mode: str, steps: int, seed: int, overrides: list[str]) -> dict[str, float]:
    timers = Timers()
    originals = [(GymVector, "step", "env"), (GymVector, "step_async", "env"), (GymVector, "step_wait", "env"),
                 (ParallelVector, "step", "env"),
                 (OnPolicyStrategy, "setup", "setup"), (OnPolicyStrategy, "teardown", "setup")]
    saved = [(cls, attribute, getattr(cls, attribute)) for cls, attribute, _ in originals]
    for cls, attribute, name in originals:
        setattr(cls, attribute, timers.wrap(name, getattr(cls, attribute)))
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            algo = rlf.make("ppo", config_file=PRESET, registry=timed_registry(timers), overrides=[
                f"steps={steps}", f"seed={seed}", f"vector='{mode}'", "progress=false",
                "checkpoint_interval=0", f"run_dir='{run_dir}'", *overrides])
            start = time.perf_counter()
            summary = algo.train()
            wall = time.perf_counter() - start
    finally:
        for cls, attribute, original in saved:
            setattr(cls, attribute, original)
    split = {name: timers.seconds[name] for name in ("setup", "env", "inference", "learning")}
    split["other"] = wall - sum(split.values())
    return {"wall": wall, "steps_per_second": steps / wall, "running_steps_per_second": steps / (wall - split["setup"]),
            "mean_return": summary.get("mean_return", float("nan")), **split}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per run (the preset's run.steps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modes", default="sync,async", help="comma-separated run.vector modes to compare")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    results = {}
    for mode in args.modes.split(","):
        results[mode] = result = run(mode, args.steps, args.seed, args.overrides)
        parts = "  ".join(f"{name} {result[name]:5.1f}s ({100 * result[name] / result['wall']:4.1f}%)"
                          for name in ("setup", "env", "inference", "learning", "other"))
        print(f"{mode:>5}: {args.steps} steps in {result['wall']:6.1f}s = {result['steps_per_second']:6.0f} env steps/s "
              f"({result['running_steps_per_second']:6.0f} without setup), mean return (last 100) "
              f"{result['mean_return']:5.1f}\n       {parts}", flush=True)
    if "sync" in results and "async" in results:
        ratio = results["sync"]["steps_per_second"] / results["async"]["steps_per_second"]
        print(f"sync / async throughput: {ratio:.2f}x")


if __name__ == "__main__":
    main()

"""The `ray` collector against the built-in ones, side by side in one run, rounds alternating.

    nice python benchmarks/ray_collector.py [--rounds 3] [--mario-steps 2048] [--skip-mario] [--skip-cost]

1. Mario PPO, 8 envs: rollout collection env steps/s with vector=async (8 subprocesses in 2 groups)
   and vector=ray (8 actors of 1 env, the default; and 2 actors of 4 envs, one per part), each round
   running every mode once. collection steps/s = env steps / (wall - learning - setup): stepping, acting and the
   core's bookkeeping count, PPO's update and starting the workers do not. Target: ray >= 0.9x async.
2. Per-step overhead and where Ray pays off: PPO on `flaky` (CartPole that burns a set CPU time per
   step, rlf_plugin_ray.testing) with 8 envs for sync, async and ray (8x1 and 2x4), at step costs from 0 (plain
   CartPole, microseconds) to 5 ms (an emulator). Printed: env steps/s and the wall time per env step.

Ray runs as one local instance started before the rounds (as a running cluster would be): its start
(~10 s here) is setup, not collection, for every mode alike. Medians over the rounds are printed last.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ppo_cartpole import Timers, timed_registry  # noqa: E402  (before peers/, which has its own ppo_cartpole)
from rlf_plugin_ray.testing import FlakyEnvPlugin  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parent / "peers"))
from _common import record  # noqa: E402
from appo_mario import tree_now  # noqa: E402

import rlf  # noqa: E402
from rlf.training.on_policy import OnPolicyStrategy  # noqa: E402

MARIO_MODES = {
    "async": ["vector='async'"],
    # one env per actor, as async has one process per env (the default where Ray has a free CPU per env)
    "ray 8x1": ["vector='ray'", "collector.envs_per_actor=1"],
    "ray 2x4": ["vector='ray'", "collector.envs_per_actor=4"],  # one actor per part (the default on 2 free CPUs)
}
COST_MODES = {"sync": ["vector='sync'"], "async": ["vector='async'"], "ray": ["vector='ray'", "collector.envs_per_actor=1"],
              "ray 2x4": ["vector='ray'", "collector.envs_per_actor=4"]}


class TreeCPU:
    """CPU seconds of this process and every descendant over a span (Ray's GCS, raylet and actor
    workers, or the async collector's env workers), from /proc every 0.2 s in a thread: a process
    alive at the start counts from its value then, one born during the span from zero (up to 0.2 s
    of a short-lived one's time is missed)."""

    def __init__(self, interval: float = 0.2):
        self.interval = interval
        self.baseline = self._tree()
        self.seen = dict(self.baseline)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    @staticmethod
    def _tree() -> dict[str, float]:
        return tree_now(str(os.getpid()))

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            for pid, cpu in self._tree().items():
                self.seen[pid] = max(self.seen.get(pid, 0.0), cpu)

    def total(self) -> float:
        """CPU seconds of the tree since the meter started, up to now."""
        for pid, cpu in self._tree().items():
            self.seen[pid] = max(self.seen.get(pid, 0.0), cpu)
        return sum(cpu - self.baseline.get(pid, 0.0) for pid, cpu in self.seen.items())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.total()


def ppo(env: str, steps: int, overrides: list[str]) -> dict[str, float]:
    """One PPO run; its wall time split into setup, learning and the collection that remains, and the CPU
    of the whole process tree (trainer, env workers or Ray's processes) per env step."""
    timers = Timers()
    marks: dict[str, float] = {}
    meter: TreeCPU | None = None

    def marked(name: str, original, after: bool):
        def run(self, *args, **kwargs):
            if not after:
                marks[name] = meter.total()
            result = original(self, *args, **kwargs)
            if after:
                marks[name] = meter.total()
            return result
        return run

    saved = [(OnPolicyStrategy, name, getattr(OnPolicyStrategy, name)) for name in ("setup", "teardown")]
    for cls, name, original in saved:
        timed = timers.wrap("setup", original)
        # CPU after the workers or actors started and before they stop: the steady per-step cost
        setattr(cls, name, marked("ready", timed, after=True) if name == "setup" else marked("done", timed, after=False))
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            algo = rlf.make("ppo", env, registry=timed_registry(timers, [("flaky", FlakyEnvPlugin())]), overrides=[
                f"steps={steps}", "progress=false", "checkpoint_interval=0", f"run_dir='{run_dir}'", *overrides])
            start, meter = time.perf_counter(), TreeCPU()
            algo.train()
            wall, cpu = time.perf_counter() - start, meter.stop()
    finally:
        for cls, name, original in saved:
            setattr(cls, name, original)
    collecting = wall - timers.seconds["setup"] - timers.seconds["learning"]
    return {"wall": wall, "collection": collecting, "steps_per_second": steps / collecting,
            "setup": timers.seconds["setup"], "learning": timers.seconds["learning"],
            "cpu_ms_per_step": 1000 * cpu / steps, "steady_cpu_ms_per_step": 1000 * (marks["done"] - marks["ready"]) / steps}


def mario(rounds: int, steps: int) -> None:
    print(f"== Mario PPO, 8 envs, {steps} env steps per run (rollout 64), collection env steps/s", flush=True)
    rates: dict[str, list[float]] = {mode: [] for mode in MARIO_MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MARIO_MODES}
    steady: dict[str, list[float]] = {mode: [] for mode in MARIO_MODES}
    for number in range(1, rounds + 1):
        line = []
        modes = list(MARIO_MODES.items())
        for mode, overrides in (modes if number % 2 else modes[::-1]):
            result = ppo("mario", steps, ["num_envs=8", "algo.rollout_steps=64", *overrides])
            rates[mode].append(result["steps_per_second"])
            cpu[mode].append(result["cpu_ms_per_step"])
            steady[mode].append(result["steady_cpu_ms_per_step"])
            line.append(f"{mode} {result['steps_per_second']:6.1f} (setup {result['setup']:4.1f}s, "
                        f"learning {result['learning']:4.1f}s, CPU ms/step {result['cpu_ms_per_step']:.1f} whole run, "
                        f"{result['steady_cpu_ms_per_step']:.1f} after start-up)")
        ratio = rates["ray 8x1"][-1] / rates["async"][-1]
        print(f"round {number}: " + " | ".join(line) + f" | ray 8x1 / async {ratio:.2f}", flush=True)
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    print("medians: " + ", ".join(f"{mode} {value:.1f}" for mode, value in medians.items()))
    for mode in ("ray 8x1", "ray 2x4"):
        ratios = [r / a for r, a in zip(rates[mode], rates["async"], strict=True)]
        print(f"{mode} / async: median {statistics.median(ratios):.2f} (rounds: "
              f"{', '.join(f'{r:.2f}' for r in ratios)}; target >= 0.9)")
    rows = []
    for mode in MARIO_MODES:
        row = [mode, str(rounds), f"{statistics.median(rates[mode]):.1f}"]
        for values in (steady, cpu):
            row.append(f"{statistics.median(values[mode]):.2f}")
            row.append("" if mode == "async" else
                       f"{statistics.median(values[mode]) / statistics.median(values['async']):.2f}x")
        rows.append(row)
    title = "Ray vs async collection on Mario (PPO, 8 envs): CPU per env step of the whole process tree"
    header = (f"medians of {rounds} rounds, alternating, {steps} env steps per run (rollout 64); CPU of the trainer, "
              "env workers or actors and Ray's own processes; 'after start-up' counts from the envs being ready to "
              "their teardown (the cost per step of a long run), 'whole run' adds starting the workers or actors "
              "(target: Ray <= 1.2x async's per step)")
    print(f"\n{title}\n{header}")
    names = ["mode", "rounds", "collection env steps/s", "CPU ms per env step, after start-up", "/ async's",
             "CPU ms per env step, whole run", "/ async's"]
    print("| " + " | ".join(names) + " |\n" + "|---" * len(names) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    record(title, header, names, rows)


def costs(rounds: int, step_costs: list[float]) -> None:
    print("== PPO on CartPole burning a set CPU time per env step, 8 envs: env steps/s and wall us per env step",
          flush=True)
    table: dict[tuple[float, str], list[float]] = {}
    for cost in step_costs:
        steps = 4096 if cost < 1000 else 2048
        for number in range(1, rounds + 1):
            line = []
            for mode, overrides in COST_MODES.items():
                result = ppo("flaky", steps, ["num_envs=8", "algo.rollout_steps=64", f"env.step_cost_us={cost}",
                                              *overrides])
                table.setdefault((cost, mode), []).append(result["steps_per_second"])
                line.append(f"{mode} {result['steps_per_second']:7.0f}")
            print(f"step cost {cost:6.0f} us, round {number}: " + " | ".join(line), flush=True)
    print("medians (env steps/s; wall us per env step; ray / async, ray / sync):")
    for cost in step_costs:
        median = {mode: statistics.median(table[(cost, mode)]) for mode in COST_MODES}
        cells = "  ".join(f"{mode} {value:7.0f}/s {1e6 / value:7.1f} us" for mode, value in median.items())
        print(f"  {cost:6.0f} us: {cells}   ray/async {median['ray'] / median['async']:.2f}  "
              f"ray/sync {median['ray'] / median['sync']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mario-steps", type=int, default=2048)
    parser.add_argument("--step-costs", default="0,100,1000,5000", help="comma-separated microseconds")
    parser.add_argument("--skip-mario", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} at start", flush=True)
    ray.init(address="local", num_cpus=8, include_dashboard=False, object_store_memory=256 * 1024**2,
             logging_level=logging.WARNING)
    try:
        if not args.skip_mario:
            mario(args.rounds, args.mario_steps)
        if not args.skip_cost:
            costs(args.rounds, [float(c) for c in args.step_costs.split(",")])
    finally:
        ray.shutdown()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()

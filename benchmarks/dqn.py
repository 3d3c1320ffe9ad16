"""DQN throughput and replay memory, measured side by side in one run.

    python benchmarks/dqn.py                 # everything
    python benchmarks/dqn.py --only cartpole # or: mario, replay
    python benchmarks/dqn.py --cartpole-steps 20000 --mario-steps 3000

1. CartPole: env steps/s of synchronous DQN, and where the time goes (agent.act, learner.learn,
   the rest = env stepping and the core's bookkeeping); the same run with one overlapped actor.
2. Mario (needs rlf-plugin-mario): env steps/s with synchronous acting vs overlapped actors, once
   learning runs (the first log window, spent filling the replay, is left out).
3. Replay memory: resident memory of 100,000 Mario-shaped (4x84x84 uint8) transitions in the
   frame-deduplicating replay, measured in a fresh process, next to what storing obs and next_obs
   whole would take.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import rlf


def train(env: str, steps: int, settings: list[str]) -> tuple[rlf.Algorithm, float, Path]:
    run_dir = Path(tempfile.mkdtemp(prefix="rlf-bench-dqn-"))
    algo = rlf.make("dqn", env, overrides=[f"steps={steps}", "progress=false", f"run_dir='{run_dir}'",
                                           "checkpoint_interval=0", *settings])
    start = time.perf_counter()
    algo.train()
    return algo, time.perf_counter() - start, run_dir


class Timed:
    """Wraps a method on a class and adds up the seconds spent in it (this process only)."""

    def __init__(self, cls, name: str):
        self.cls, self.name, self.original, self.seconds = cls, name, getattr(cls, name), 0.0
        timer = self

        def wrapper(self_, *args, **kwargs):
            start = time.perf_counter()
            try:
                return timer.original(self_, *args, **kwargs)
            finally:
                timer.seconds += time.perf_counter() - start

        setattr(cls, name, wrapper)

    def restore(self) -> None:
        setattr(self.cls, self.name, self.original)


def cartpole(steps: int) -> None:
    from rlf_plugin_dqn.agent import DQNAgent
    from rlf_plugin_dqn.learner import DQNLearner

    print(f"== CartPole-v1 DQN, {steps} env steps, defaults (train_frequency 1, batch 64, MLP 128x128)")
    act, learn = Timed(DQNAgent, "act"), Timed(DQNLearner, "learn")
    try:
        _, seconds, _ = train("gym:CartPole-v1", steps, [])
    finally:
        act.restore()
        learn.restore()
    rest = seconds - act.seconds - learn.seconds
    print(f"synchronous      {steps / seconds:8.0f} env steps/s   ({seconds:.1f} s)")
    print(f"  learning (learner.learn: replay insert + updates) {100 * learn.seconds / seconds:5.1f} %")
    print(f"  acting   (agent.act)                              {100 * act.seconds / seconds:5.1f} %")
    print(f"  env stepping and core bookkeeping                 {100 * rest / seconds:5.1f} %")
    _, overlapped, _ = train("gym:CartPole-v1", steps, ["algo.actors=1"])
    print(f"1 actor process  {steps / overlapped:8.0f} env steps/s   ({overlapped:.1f} s)   "
          f"ratio to synchronous {seconds / overlapped:.2f}x")


def steady_rate(run_dir: Path) -> float:
    """Env steps/s over the log windows after the first (the first only fills the replay)."""
    with open(run_dir / "metrics.csv") as handle:
        rows = list(csv.DictReader(handle))
    steps = seconds = 0.0
    previous = float(rows[0]["env_step"])
    for row in rows[1:]:
        window = float(row["env_step"]) - previous
        previous = float(row["env_step"])
        steps += window
        seconds += window / float(row["steps_per_second"])
    return steps / seconds if seconds else float(rows[-1]["steps_per_second"])


def mario(steps: int) -> None:
    registry = rlf.registry()
    if "mario" not in registry.environments:
        print("== Mario: skipped, rlf-plugin-mario is not installed (pip install rlf-plugin-mario)")
        return
    warmup = max(500, steps // 5)
    common = [f"algo.min_replay_size={warmup}", "algo.train_frequency=4", "algo.batch_size=32",
              "algo.buffer_size=20000", f"log_interval={warmup}"]
    print(f"== Mario 1-1 DQN (Nature CNN, frame replay, train_frequency 4, batch 32), {steps} env steps; "
          f"rates after the first {warmup} (replay filling); {os.cpu_count()} CPU cores")
    rates = {}
    for label, settings in (("synchronous, 1 env in a subprocess", ["num_envs=1", "vector=async"]),
                            ("synchronous, 2 envs in subprocesses", ["num_envs=2", "vector=async"]),
                            ("1 actor process, 1 env", ["num_envs=1", "algo.actors=1"]),
                            ("2 actor processes, 1 env each", ["num_envs=1", "algo.actors=2"])):
        _, seconds, run_dir = train("mario", steps, [*common, *settings])
        rates[label] = steady_rate(run_dir)
        print(f"{label:38s} {rates[label]:7.1f} env steps/s while learning   (whole run {steps / seconds:6.1f})",
              flush=True)
    base = rates["synchronous, 1 env in a subprocess"]
    for label, rate in rates.items():
        print(f"  {label:38s} {rate / base:5.2f}x the synchronous 1-env rate")


REPLAY_CHILD = """
import time
from pathlib import Path
import numpy as np
from rlf_plugin_dqn.replay import FrameReplay
def rss_mib():
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024
count, episode = {count}, 1000
total = count + count // 5  # past capacity: the rings have wrapped, as in a long run
rng = np.random.default_rng(0)
pool = rng.integers(0, 256, size=(257, 84, 84), dtype=np.uint8)  # frames are drawn from a pool
before = rss_mib()
buffer = FrameReplay(count, (4, 84, 84))
stack = np.stack([pool[0]] * 4)
start = time.perf_counter()
for t in range(total):
    new = pool[(t * 7 + 1) % 257]
    nxt = np.concatenate([stack[1:], new[None]])
    buffer.add(stack[None], np.array([t % 7]), np.array([0.5], np.float32), nxt[None], np.array([0.0]))
    stack = np.stack([pool[(t * 5) % 257]] * 4) if (t + 1) % episode == 0 else nxt
fill = (time.perf_counter() - start) / total
after = rss_mib()
start = time.perf_counter()
for _ in range(100):
    buffer.sample(32, rng)
sample = (time.perf_counter() - start) / 100
print(after - before, buffer.frames_written, len(buffer), fill, sample)
"""


def replay(count: int = 100_000) -> None:
    code = REPLAY_CHILD.format(count=count)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    grown, frames, stored, fill, sample = float(out[0]), int(out[1]), int(out[2]), float(out[3]), float(out[4])
    whole = count * 2 * 4 * 84 * 84 / 2**20
    print(f"== Replay memory: a {count}-transition replay of 4x84x84 uint8 frame stacks, filled with "
          f"{count + count // 5} (episodes of 1000 steps), so every ring has wrapped")
    print(f"frame replay resident       {grown:8.0f} MiB   ({stored} transitions held, {frames} frames written; "
          f"limit 1536 MiB: {'ok' if grown <= 1536 else 'OVER'})")
    print(f"obs + next_obs stored whole {whole:8.0f} MiB   ratio {whole / grown:.1f}x")
    print(f"adding: {1e6 * fill:.0f} us per transition; sampling a batch of 32: {1e3 * sample:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("cartpole", "mario", "replay"))
    parser.add_argument("--cartpole-steps", type=int, default=20_000)
    parser.add_argument("--mario-steps", type=int, default=2_500)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f} at start")
    if args.only in (None, "cartpole"):
        cartpole(args.cartpole_steps)
    if args.only in (None, "mario"):
        mario(args.mario_steps)
    if args.only in (None, "replay"):
        replay()


if __name__ == "__main__":
    main()

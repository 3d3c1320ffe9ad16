"""Start-up of `rlf train ppo --env mario` (8 subprocess envs): where the time to the first env step goes.

    python benchmarks/mario_startup.py [--rounds 3] [--num-envs 8]

Each round starts a fresh interpreter (as a user's `rlf train` does) that runs the real CLI,
`rlf train ppo --env mario --steps <num_envs> --no-progress`, with timers wrapped around the phases
(nothing else changes). The clock starts in the parent just before the child process is created, so
interpreter start-up counts. Phases are printed as offsets from that start (start -> end, seconds):

  python + import rlf    interpreter start and `import rlf, rlf.cli` (no torch)
  check: probe env       the env built once in the main process to read its spaces (ROM load)
  env workers            the subprocess env groups started until every worker has built its env
  build agent            PPO's agent, including `import torch` and the CNN's construction
  build learner          PPO's learner (Adam's first construction imports parts of torch lazily)
  reset                  the first reset of every env
  loggers on_start       CSV, TensorBoard (tensorboardX) and progress loggers starting
  first act              the first CNN forward pass on the 8 observations
  first env step         until the first vector step's results are back

"first env step" is the figure the issue's target is about (< 3 s). Phases may overlap when work
runs in the background (the TensorBoard writer's import, for one). The medians over rounds are
printed last. The machine's load is printed too: the background Mario runs and other work slow
every phase; compare rounds of one run, not runs at different loads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULT = "STARTUP "
PHASES = ("python + import rlf", "check: probe env", "env workers", "build agent", "build learner", "reset",
          "loggers on_start", "first act", "first env step")


def child(t0: float, num_envs: int) -> None:
    events: dict[str, list[float]] = {}

    def mark(name: str, start: float, end: float) -> None:
        events.setdefault(name, [start - t0, end - t0])

    import rlf_plugin_ppo.factory as ppo_factory

    import rlf
    import rlf.api
    import rlf.cli
    import rlf.envs
    import rlf.loggers

    mark("python + import rlf", t0, time.time())

    def timed(owner, attribute: str, name: str, once: bool = True):
        original = getattr(owner, attribute)

        def wrapper(*args, **kwargs):
            if once and name in events:
                return original(*args, **kwargs)
            start = time.time()
            try:
                return original(*args, **kwargs)
            finally:
                mark(name, start, time.time())

        setattr(owner, attribute, wrapper)

    timed(rlf.api.Algorithm, "_probe_spec", "check: probe env")
    timed(rlf.envs.GymVector, "__init__", "env workers")
    timed(rlf.envs.GymVector, "reset", "reset")
    timed(rlf.envs.GymVector, "step_async", "first env step")
    timed(rlf.envs.GymVector, "step", "first env step")
    timed(rlf.loggers.TensorBoardLogger, "on_start", "loggers on_start")
    timed(ppo_factory, "build_learner", "build learner")
    original_agent = ppo_factory.build_agent

    def build_agent(context):
        start = time.time()
        agent = original_agent(context)
        mark("build agent", start, time.time())
        act = agent.act

        def first_act(*args, **kwargs):
            start = time.time()
            try:
                return act(*args, **kwargs)
            finally:
                mark("first act", start, time.time())
                agent.act = act

        agent.act = first_act
        return agent

    ppo_factory.build_agent = build_agent
    # step_wait completes what step_async started: the first env step ends when its results are back
    step_wait = rlf.envs.GymVector.step_wait

    def first_wait(self, *args, **kwargs):
        try:
            return step_wait(self, *args, **kwargs)
        finally:
            if "first env step" in events and "first env step done" not in events:
                events["first env step"][1] = time.time() - t0
                events["first env step done"] = []

    rlf.envs.GymVector.step_wait = first_wait
    with tempfile.TemporaryDirectory() as run_dir:
        code = rlf.cli.main(["train", "ppo", "--env", "mario", "--steps", str(num_envs), "--no-progress",
                             "--run-dir", str(Path(run_dir) / "run"), "--set", f"num_envs={num_envs}",
                             "--set", "checkpoint_interval=0"])
    events.pop("first env step done", None)
    print(RESULT + json.dumps({"exit_code": code, "events": events}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.num_envs)
        return
    if args.rounds < 1 or args.num_envs < 1:
        print("error: --rounds and --num-envs must be at least 1", file=sys.stderr)
        raise SystemExit(2)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPU cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
          f"(1/5/15 min), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    rounds: list[dict[str, list[float]]] = []
    for r in range(args.rounds):
        t0 = time.time()
        done = subprocess.run([sys.executable, __file__, "--child", repr(t0), "--num-envs", str(args.num_envs)],
                              capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
        if done.returncode != 0 or not lines:
            print(f"round {r + 1} failed (exit code {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
            raise SystemExit(1)
        result = json.loads(lines[-1][len(RESULT):])
        if result["exit_code"] != 0:
            print(f"round {r + 1}: rlf train exited with {result['exit_code']}:\n{done.stderr[-2000:]}",
                  file=sys.stderr)
            raise SystemExit(1)
        rounds.append(result["events"])
        print(f"\nround {r + 1}/{args.rounds} (whole process {time.time() - t0:.1f} s)")
        for name in PHASES:
            if name in result["events"]:
                start, end = result["events"][name]
                print(f"  {name:20s} {start:6.2f} -> {end:6.2f}  ({end - start:5.2f} s)")
    print(f"\nmedians over {len(rounds)} rounds (offsets from process creation, seconds)")
    print("| phase | start | end | duration |\n|---|---|---|---|")
    for name in PHASES:
        spans = [events[name] for events in rounds if name in events]
        if spans:
            start = statistics.median(s for s, _ in spans)
            end = statistics.median(e for _, e in spans)
            duration = statistics.median(e - s for s, e in spans)
            print(f"| {name} | {start:.2f} | {end:.2f} | {duration:.2f} |")


if __name__ == "__main__":
    main()

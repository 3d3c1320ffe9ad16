"""CPU time of one DQN gradient step (sample a batch, TD target, loss, backward, clip, Adam, target
sync), at the CartPole preset (256x256 MLP, batch 64, plain DQN) unless told otherwise.

    python benchmarks/dqn_gradient_step.py                                   # this interpreter
    python benchmarks/dqn_gradient_step.py --python /work/main/.venv/bin/python --python .venv/bin/python

With several ``--python`` (two checkouts' venvs), each round runs every interpreter once, in a fresh
process, alternating the order round by round; the table shows each one's median over rounds and the
ratio to the first. CPU time of this thread (``time.thread_time``), so the machine's load inflates it
far less than wall time. The replay holds random CartPole-shaped transitions: the arithmetic and the
per-call overheads are a real run's, the values are not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRESET = Path(__file__).resolve().parents[1] / "plugins" / "dqn" / "src" / "rlf_plugin_dqn" / "presets" / "cartpole.toml"


def child(steps: int, overrides: list[str]) -> dict:
    import numpy as np
    import torch  # noqa: F401

    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("dqn", "gym:CartPole-v1", config_file=str(PRESET),
                        overrides=["seed=0", f"run_dir='{run_dir}'", "algo.torch_threads=1", *overrides])
        context = algo._context(algo._probe_spec())
        agent = algo.resolved.algorithm.build_agent(context)
        learner = algo.resolved.algorithm.build_learner(context, agent)
    rng = np.random.default_rng(0)
    agent_id, fill = next(iter(learner.buffers)), 5_000
    obs = rng.normal(size=(fill + 1, 4)).astype(np.float32)
    learner.buffers[agent_id].add(obs[:-1], rng.integers(0, 2, size=fill), np.ones(fill, np.float32), obs[1:],
                                  (rng.random(fill) < 0.05).astype(np.float32))
    for _ in range(100):  # warm-up: first calls allocate and pick kernels
        learner._optimize(agent_id)
    start = time.thread_time()
    for _ in range(steps):
        learner._optimize(agent_id)
    seconds = time.thread_time() - start
    learner._metrics()
    return {"ms_per_step": 1e3 * seconds / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", action="append", help="interpreter to measure (repeat to compare checkouts)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1_000, help="gradient steps timed per round")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="config override on top of the preset, e.g. --set algo.double_dqn=true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.steps, args.overrides)), flush=True)
        return
    if args.rounds < 1 or args.steps < 1:
        print("error: --rounds and --steps must be at least 1", file=sys.stderr)
        raise SystemExit(2)
    pythons = args.python or [sys.executable]
    times: dict[str, list[float]] = {p: [] for p in pythons}
    for r in range(args.rounds):
        for python in pythons if r % 2 == 0 else pythons[::-1]:
            command = [python, __file__, "--child", "--steps", str(args.steps)]
            command += [f"--set={o}" for o in args.overrides]
            done = subprocess.run(command, capture_output=True, text=True,
                                  env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                sys.exit(f"{python} failed:\n{done.stderr[-2000:]}")
            value = json.loads(line[7:])["ms_per_step"]
            times[python].append(value)
            print(f"  round {r + 1}/{args.rounds}  {python}: {value:.3f} ms per gradient step", flush=True)
    base = statistics.median(times[pythons[0]])
    print(f"\nDQN gradient step, CPU ms (median of {args.rounds} rounds x {args.steps} steps; --set {args.overrides})")
    for python in pythons:
        m = statistics.median(times[python])
        print(f"  {python:50s} {m:.3f} ms   {base / m:.2f}x the first's speed")


if __name__ == "__main__":
    main()

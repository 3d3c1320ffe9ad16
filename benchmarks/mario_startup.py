"""Start-up of `rlf train ppo --env mario` (8 subprocess envs): where the time to the first env step,
and to the first update, goes.

    python benchmarks/mario_startup.py [--rounds 3] [--num-envs 8] [--baseline OTHER/.venv/bin/python]

Each round starts a fresh interpreter (as a user's `rlf train` does) that runs the real CLI,
`rlf train ppo --env mario --steps <2 x num_envs> --no-progress` with the preset's rollout cut to 2 steps
(one minibatch, one epoch: ``--set algo.rollout_steps=2 ...``), so the first update comes after two vector
steps instead of a whole 512-step rollout, with timers wrapped around the phases (nothing else changes). The clock starts in the parent just before the child process is created, so
interpreter start-up counts. Phases are printed as offsets from that start (start -> end, seconds):

  python + import rlf    interpreter start and `import rlf, rlf.cli.commands` (no torch)
  check: probe env       the env built once in the main process to read its spaces (ROM load)
  env workers            the subprocess env groups started until every worker has built its env
  build agent            PPO's agent, including `import torch` and the CNN's construction (in a
                         background thread while the env workers start)
  build learner          PPO's learner (Adam's first construction imports torch._dynamo lazily;
                         finished in that thread, waited for only at the first update)
  reset                  the first reset of every env
  loggers on_start       CSV, TensorBoard (tensorboardX) and progress loggers starting
  first act              the first CNN forward pass on the 8 observations
  first env step         until the first vector step's results are back
  learner ready          until the learner is built and waited for (the background build joined)
  first update           PPO's first learn() call on the 2-step rollout: the run can now learn
  import floor           (printed apart) `python -c "import torch, rlf"`: no start-up can beat it

With ``--baseline``, another checkout's interpreter (its own rlf) is timed too, the two alternating
round by round. Each round also prints the CPU seconds spent until the first env step: this
process (all its threads), the env workers and their fork server (from /proc, Linux only); on a
loaded machine that figure moves far less than the wall-clock offsets.

"first env step" is the figure the start-up target was about (< 3 s); "first update" is the other one: the
agent and the learner built and used once. Phases may overlap when work
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

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from _common import record  # noqa: E402

RESULT = "STARTUP "
PHASES = ("python + import rlf", "check: probe env", "env workers", "build agent", "build learner", "reset",
          "loggers on_start", "first act", "first env step", "learner ready", "first update")


def child(t0: float, num_envs: int) -> None:
    events: dict[str, list[float]] = {}

    def mark(name: str, start: float, end: float) -> None:
        events.setdefault(name, [start - t0, end - t0])

    import rlf_plugin_ppo.factory as ppo_factory

    import rlf
    import rlf.api
    import rlf.cli.commands
    import rlf.envs.gym_vector
    import rlf.logging.loggers

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
    timed(rlf.envs.gym_vector.GymVector, "__init__", "env workers")
    timed(rlf.envs.gym_vector.GymVector, "reset", "reset")
    timed(rlf.envs.gym_vector.GymVector, "step_async", "first env step")
    timed(rlf.envs.gym_vector.GymVector, "step", "first env step")
    timed(rlf.logging.loggers.TensorBoardLogger, "on_start", "loggers on_start")
    timed(ppo_factory, "build_learner", "build learner")
    import rlf.training.startup

    timed(rlf.training.startup.BackgroundBuild, "learner", "learner ready")
    import rlf_plugin_ppo.learner as ppo_learner

    learn = ppo_learner.PPOLearner.learn

    def first_learn(self, *args, **kwargs):
        start = time.time()
        try:
            return learn(self, *args, **kwargs)
        finally:
            mark("first update", start, time.time())  # the first call only: mark keeps the first span
            if "envs" in seen and not cpu_update:
                cpu_update.update(cpu_to_now(seen["envs"]))

    ppo_learner.PPOLearner.learn = first_learn
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
    step_wait = rlf.envs.gym_vector.GymVector.step_wait

    def first_wait(self, *args, **kwargs):
        try:
            return step_wait(self, *args, **kwargs)
        finally:
            seen["envs"] = self
            if "first env step" in events and "first env step done" not in events:
                events["first env step"][1] = time.time() - t0
                events["first env step done"] = []
                cpu.update(cpu_to_now(self))

    cpu: dict[str, float] = {}
    cpu_update: dict[str, float] = {}
    seen: dict[str, object] = {}
    rlf.envs.gym_vector.GymVector.step_wait = first_wait
    with tempfile.TemporaryDirectory() as run_dir:
        code = rlf.cli.commands.main(["train", "ppo", "--env", "mario", "--steps", str(2 * num_envs), "--no-progress",
                             "--run-dir", str(Path(run_dir) / "run"), "--set", f"num_envs={num_envs}",
                             "--set", "checkpoint_interval=0", "--set", "algo.rollout_steps=2",
                             "--set", "algo.minibatches=1", "--set", "algo.epochs=1",
                             # the preset's periodic evaluation would add 20 episodes at the end: not start-up
                             "--set", "eval_interval=0"])
    events.pop("first env step done", None)
    print(RESULT + json.dumps({"exit_code": code, "events": events, "cpu": cpu, "cpu_update": cpu_update}),
          flush=True)


def cpu_to_now(envs) -> dict[str, float]:
    """CPU seconds (user + system) used so far by this process (all its threads), its env workers and
    their fork server (a child of this process; the workers are its children, not ours)."""
    import multiprocessing
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    pids = [process.pid for group in getattr(envs, "groups", []) for process in getattr(group, "processes", [])]
    server = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)
    return {"main process": usage.ru_utime + usage.ru_stime, "env workers": sum(map(_proc_cpu, pids)),
            "fork server": _proc_cpu(server) if server else 0.0}


def _proc_cpu(pid: int) -> float:
    """A live process's user + system CPU seconds, from /proc (0 where there is none: not Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_round(python: str, num_envs: int, label: str) -> dict:
    t0 = time.time()
    done = subprocess.run([python, __file__, "--child", repr(t0), "--num-envs", str(num_envs)],
                          capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT)]
    if done.returncode != 0 or not lines:
        print(f"{label} failed (exit code {done.returncode}):\n{done.stderr[-2000:]}", file=sys.stderr)
        raise SystemExit(1)
    result = json.loads(lines[-1][len(RESULT):])
    if result["exit_code"] != 0:
        print(f"{label}: rlf train exited with {result['exit_code']}:\n{done.stderr[-2000:]}", file=sys.stderr)
        raise SystemExit(1)
    print(f"\n{label} (whole process {time.time() - t0:.1f} s, load average {os.getloadavg()[0]:.1f})")
    for name in PHASES:
        if name in result["events"]:
            start, end = result["events"][name]
            print(f"  {name:20s} {start:6.2f} -> {end:6.2f}  ({end - start:5.2f} s)")
    for key, what in (("cpu", "first env step"), ("cpu_update", "first update")):
        cpu = result.get(key) or {}
        if cpu:
            print(f"  CPU to the {what}: " + ", ".join(f"{k} {v:.2f} s" for k, v in cpu.items())
                  + f", total {sum(cpu.values()):.2f} s")
    return result


def import_floor(python: str) -> float:
    """Seconds from process creation to `import torch, rlf` done: what any start-up pays before its own work."""
    t0 = time.time()
    subprocess.run([python, "-c", "import torch, rlf"], check=True)
    return time.time() - t0


def summary(name: str, results: list[dict]) -> None:
    title = f"Start-up of `rlf train ppo --env mario`, {name}"
    header = f"medians over {len(results)} rounds (offsets from process creation, seconds)"
    print(f"\n{title}: {header}")
    print("| phase | start | end | duration |\n|---|---|---|---|")
    table = []
    for phase in PHASES:
        spans = [r["events"][phase] for r in results if phase in r["events"]]
        if spans:
            start = statistics.median(s for s, _ in spans)
            end = statistics.median(e for _, e in spans)
            duration = statistics.median(e - s for s, e in spans)
            table.append([phase, f"{start:.2f}", f"{end:.2f}", f"{duration:.2f}"])
            print(f"| {phase} | {start:.2f} | {end:.2f} | {duration:.2f} |")
    for key, what in (("cpu", "first env step"), ("cpu_update", "first update")):
        cpus = [r[key] for r in results if r.get(key)]
        if cpus:
            print(f"CPU seconds to the {what} (median): "
                  + ", ".join(f"{k} {statistics.median(c.get(k, 0.0) for c in cpus):.2f}" for k in cpus[0])
                  + f", total {statistics.median(sum(c.values()) for c in cpus):.2f}")
    floors = [r["import_floor"] for r in results if "import_floor" in r]
    if floors:
        print(f"import floor (python -c 'import torch, rlf', median): {statistics.median(floors):.2f} s")
        table.append(["import floor: `python -c 'import torch, rlf'`", "0.00", f"{statistics.median(floors):.2f}",
                      f"{statistics.median(floors):.2f}"])
    for key, what in (("cpu", "first env step"), ("cpu_update", "first update")):
        cpus = [r[key] for r in results if r.get(key)]
        if cpus:
            table.append([f"CPU seconds to the {what} (all processes)", "", "",
                          f"{statistics.median(sum(c.values()) for c in cpus):.2f}"])
    load = os.getloadavg()[0]
    record(title, f"{header}; load average {load:.1f} at the end", ["phase", "start", "end", "duration"], table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="also time this interpreter's rlf (e.g. another checkout's .venv/bin/python), "
                             "alternating with this one round by round")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.num_envs)
        return
    if args.rounds < 1 or args.num_envs < 1:
        print("error: --rounds and --num-envs must be at least 1", file=sys.stderr)
        raise SystemExit(2)
    if args.baseline and not Path(args.baseline).is_file():
        print(f"error: --baseline {args.baseline} is not an interpreter; pass e.g. /path/to/.venv/bin/python",
              file=sys.stderr)
        raise SystemExit(2)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPU cores, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
          f"(1/5/15 min), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    sides = {"this checkout": sys.executable, **({"baseline": args.baseline} if args.baseline else {})}
    results: dict[str, list[dict]] = {name: [] for name in sides}
    for r in range(args.rounds):
        order = list(sides.items()) if r % 2 == 0 else list(reversed(sides.items()))
        for name, python in order:
            result = run_round(python, args.num_envs, f"round {r + 1}/{args.rounds}, {name}")
            result["import_floor"] = import_floor(python)
            print(f"  import floor         {result['import_floor']:.2f} s")
            results[name].append(result)
    for name, rows in results.items():
        summary(name, rows)
    print(f"\nload average after: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()

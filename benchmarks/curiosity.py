"""Curiosity on PPO, side by side: plain PPO vs ICM vs RND vs kNN episodic novelty.

1. The sparse corridor (benchmarks/sparse_env.py): at equal env steps, the distinct cells visited
   over the run, the share of episodes that reached the goal and the env step of the first goal.
2. The cost: wall-clock seconds per env step of every curiosity learner relative to plain PPO,
   measured in this run on the same machine: whole training runs (corridor, and Mario when
   installed), and the update alone on the same synthetic rollouts, repeated and interleaved so that
   other load on the machine hits every algorithm alike (acting is PPO's in all four, so the update
   is where the overhead lives).
3. Mario (when rlf-plugin-mario is installed) with the extrinsic reward hidden: the furthest x
   position any episode reached in a fixed small budget.

    python benchmarks/curiosity.py                          # corridor + Mario, defaults below
    python benchmarks/curiosity.py --steps 49152 --seeds 0 1 --mario-steps 0   # corridor only

Every algorithm runs with the same PPO settings (``--set`` adds more, e.g. ``--set algo.lr=3e-4``).
"""

from __future__ import annotations

import argparse
import csv
import functools
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sparse_env  # noqa: E402 - registers the corridor with gymnasium

import rlf  # noqa: E402
from rlf import hookimpl  # noqa: E402
from rlf.plugins import load_registry  # noqa: E402

ALGORITHMS = ("ppo", "icm", "rnd", "knn")
CORRIDOR = f"gym:{sparse_env.ENV_ID}"
MARIO_WITHOUT_REWARD = "mario-noreward"

RLF_API_VERSION = 1  # this script is also the plugin that registers MARIO_WITHOUT_REWARD


@hookimpl
def rlf_register_environments(register):
    try:
        from rlf_plugin_mario.config import MarioConfig
        from rlf_plugin_mario.env import make_mario
    except ImportError:
        return
    register(MARIO_WITHOUT_REWARD, build_env=functools.partial(sparse_env.build_without_reward, make_mario),
             config=MarioConfig, prefer_subprocess=True)


def train(registry, algorithm: str, env: str, steps: int, seed: int, overrides: list[str]) -> tuple[float, list[dict]]:
    """Seconds of training and the rows of episodes.csv (in the order the episodes ended)."""
    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make(algorithm, env, registry=registry, overrides=[
            f"steps={steps}", f"seed={seed}", "num_envs=8", "progress=false", f"run_dir='{run_dir}'",
            f"log_interval={steps}", "checkpoint_interval=0", *overrides])
        start = time.perf_counter()
        algo.train()
        seconds = time.perf_counter() - start
        with open(Path(run_dir) / "episodes.csv") as handle:
            rows = [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(handle)]
    return seconds, rows


def corridor(registry, args) -> dict[str, list[float]]:
    print(f"\n== sparse corridor: length {args.length}, {args.steps} env steps per run, seeds {args.seeds}")
    print(f"{'algorithm':10} {'seed':>4} {'distinct':>8} {'goal rate':>9} {'last 25%':>8} {'first goal':>10} "
          f"{'s/1k steps':>10}")
    env_overrides = [f"env.kwargs={{length={args.length}}}", *args.set]
    seconds: dict[str, list[float]] = {name: [] for name in ALGORITHMS}
    summary: dict[str, list[tuple[float, float]]] = {name: [] for name in ALGORITHMS}
    for seed in args.seeds:
        for name in ALGORITHMS:
            took, rows = train(registry, name, CORRIDOR, args.steps, seed, env_overrides)
            distinct = max(row["max_position"] for row in rows) + 1
            goal_rate = float(np.mean([row["goal"] for row in rows]))
            late_rate = float(np.mean([row["goal"] for row in rows[-max(1, len(rows) // 4):]]))
            firsts = [row["env_step"] for row in rows if row["goal"] > 0]
            first = f"{int(firsts[0])}" if firsts else "never"
            seconds[name].append(took / args.steps)
            summary[name].append((distinct, goal_rate))
            print(f"{name:10} {seed:>4} {distinct:>8.0f} {goal_rate:>9.3f} {late_rate:>8.3f} {first:>10} "
                  f"{1000 * took / args.steps:>10.2f}", flush=True)
    print("mean over seeds:")
    for name in ALGORITHMS:
        distinct, goal = np.mean(summary[name], axis=0)
        print(f"  {name:8} distinct cells {distinct:5.1f} / {args.length}   goal rate {goal:.3f}")
    return seconds


def mario(registry, args) -> dict[str, list[float]] | None:
    if MARIO_WITHOUT_REWARD not in registry.environments:
        print("\n== Mario: rlf-plugin-mario is not installed; skipped")
        return None
    print(f"\n== Mario 1-1 without extrinsic reward: {args.mario_steps} env steps per run, seed {args.seeds[0]}, "
          f"episodes cut at {args.mario_episode_steps} steps")
    print(f"{'algorithm':10} {'furthest x':>10} {'mean x':>8} {'episodes':>8} {'s/1k steps':>10}")
    seconds: dict[str, list[float]] = {}
    overrides = [f"env.max_episode_steps={args.mario_episode_steps}", *args.mario_set]
    for name in ALGORITHMS:
        took, rows = train(registry, name, MARIO_WITHOUT_REWARD, args.mario_steps, args.seeds[0], overrides)
        xs = [row["x_pos_max"] for row in rows if "x_pos_max" in row]
        seconds[name] = [took / args.mario_steps]
        print(f"{name:10} {max(xs, default=0):>10.0f} {np.mean(xs) if xs else 0:>8.0f} {len(xs):>8} "
              f"{1000 * took / args.mario_steps:>10.2f}", flush=True)
    return seconds


def update_cost(registry, title: str, observation_space, n_actions: int, repeats: int,
                steps: int = 128, envs: int = 8) -> dict[str, list[float]]:
    """Seconds per env step of ``learner.learn`` on one synthetic rollout of ``steps`` x ``envs``."""
    from gymnasium import spaces

    from rlf import SINGLE_AGENT, BuildContext, EnvSpec, Rollout, RunConfig

    spec = EnvSpec(title, (SINGLE_AGENT,), {SINGLE_AGENT: observation_space},
                   {SINGLE_AGENT: spaces.Discrete(n_actions)}, False, envs)
    rng = np.random.default_rng(0)
    frames = np.stack([observation_space.sample() for _ in range((steps + 1) * envs)]).reshape(
        steps + 1, envs, *observation_space.shape)
    learners = {}
    for name in ALGORITHMS:
        algorithm = registry.algorithm(name)
        context = BuildContext(spec, algorithm.config(rollout_steps=steps), RunConfig(algorithm=name, env=title),
                               0, "cpu")
        agent = algorithm.build_agent(context)
        learners[name] = algorithm.build_learner(context, agent)
    acting = [learners["ppo"].agent.act({SINGLE_AGENT: frames[t]}) for t in range(steps)]
    actions = np.stack([a.actions[SINGLE_AGENT] for a in acting])
    extras = {key: np.stack([a.extras[SINGLE_AGENT][key] for a in acting]) for key in ("log_prob", "value")}
    dones = rng.random((steps, envs)) < 0.01
    zeros = np.zeros((steps, envs), dtype=np.float32)

    def rollout() -> Rollout:  # a fresh copy each time: learners may write into it
        arrays = {"obs": frames[:-1], "next_obs": frames[1:], "actions": actions, "rewards": zeros,
                  "terminated": dones, "dones": dones, "alive": np.ones((steps, envs), dtype=bool),
                  "values": extras["value"], "next_values": extras["value"], "advantages": zeros, "returns": zeros}
        return Rollout(**{key: {SINGLE_AGENT: value.copy()} for key, value in arrays.items()},
                       extras={SINGLE_AGENT: {key: value.copy() for key, value in extras.items()}})

    seconds: dict[str, list[float]] = {name: [] for name in ALGORITHMS}
    for _ in range(repeats):
        for name in ALGORITHMS:
            batch = rollout()
            start = time.perf_counter()
            learners[name].learn(batch)
            seconds[name].append((time.perf_counter() - start) / (steps * envs))
    return {name: [min(values)] for name, values in seconds.items()}  # the least disturbed repeat


def overhead(title: str, seconds: dict[str, list[float]]) -> None:
    base = float(np.mean(seconds["ppo"]))
    ratios = "  ".join(f"{name} {np.mean(seconds[name]) / base:.2f}x" for name in ALGORITHMS if name != "ppo")
    print(f"{title}: PPO {1000 * base:.2f} s per 1k env steps; relative to PPO: {ratios}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=49_152, help="env steps per corridor run")
    parser.add_argument("--length", type=int, default=40, help="corridor length (cells)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--mario-steps", type=int, default=16_384, help="env steps per Mario run (0 = skip)")
    parser.add_argument("--mario-episode-steps", type=int, default=1000, help="Mario episode time limit (agent steps)")
    parser.add_argument("--set", nargs="*", default=["algo.lr=0.001"], help="overrides for every corridor run")
    parser.add_argument("--mario-set", nargs="*", default=[], help="overrides for every Mario run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats of the update-only timing")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 keeps timings comparable)")
    args = parser.parse_args()
    from rlf.nn import set_threads

    set_threads(args.threads)
    registry = load_registry(extra_plugins=[("curiosity-benchmark", sys.modules[__name__])])
    corridor_seconds = corridor(registry, args) if args.steps else None
    mario_seconds = mario(registry, args) if args.mario_steps else None
    print("\n== cost per env step (wall clock, same machine, same run)")
    if corridor_seconds:
        overhead("whole runs, corridor (MLP)      ", corridor_seconds)
    if mario_seconds:
        overhead("whole runs, Mario (CNN)         ", mario_seconds)
    from gymnasium import spaces

    overhead("update only, corridor obs (MLP) ",
             update_cost(registry, "corridor", spaces.Box(0.0, 1.0, (args.length,), np.float32), 4, args.repeats))
    overhead("update only, 4x84x84 uint8 (CNN)",
             update_cost(registry, "frames", spaces.Box(0, 255, (4, 84, 84), np.uint8), 7, args.repeats))


if __name__ == "__main__":
    main()

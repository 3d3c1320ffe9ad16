"""Where one env step of tabular IQL goes, in CPU time: acting, the vector env (the env's own step
inside it), the update, episode tracking; and ``train()`` as a whole.

    python benchmarks/tabular_step_cost.py                         # 1v1 chase, 1 env, 20k steps
    python benchmarks/tabular_step_cost.py --scenario grid-3v3 --num-envs 8
    python benchmarks/tabular_step_cost.py --profile               # train() under cProfile (CPU clock), top 25

CPU time (``time.thread_time_ns``) rather than wall time, and the 10th percentile over 64-step chunks
beside the median: on a loaded machine that is the figure the load inflates least. To compare two
checkouts, run this script with each one's interpreter, alternately.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time

import rlf
from rlf.interfaces import Transitions

CHUNK = 64


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="chase-1v1", help="predator-prey scenario (grid-3v3: 20 %% obstacles)")
    parser.add_argument("--num-envs", type=int, default=1)
    parser.add_argument("--steps", type=int, default=20_000, help="env steps of the whole train() run")
    parser.add_argument("--chunks", type=int, default=200, help="64-step chunks timed part by part")
    parser.add_argument("--profile", action="store_true",
                        help="instead: train() under cProfile on the process's CPU clock, functions by own time")
    args = parser.parse_args()
    overrides = [f"env.scenario='{args.scenario}'", "env.learners='all'", f"num_envs={args.num_envs}", "seed=0",
                 "progress=false", "checkpoint_interval=0"]
    if args.scenario == "grid-3v3":
        overrides.append("env.obstacle_share=0.2")

    if args.profile:
        import cProfile
        import pstats

        with tempfile.TemporaryDirectory() as run_dir:
            algo = rlf.make("iql", "predator-prey",
                            overrides=[*overrides, f"steps={args.steps}", f"run_dir='{run_dir}'"])
            profiler = cProfile.Profile(time.process_time)  # CPU time: the load's waiting left out
            profiler.runcall(algo.train)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
        return
    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("iql", "predator-prey", overrides=[*overrides, f"steps={args.steps}", f"run_dir='{run_dir}'"])
        cpu = time.process_time()
        algo.train()
        cpu = time.process_time() - cpu
    print(f"train(), {args.steps} env steps: {cpu:.2f} s CPU ({args.steps / cpu:,.0f} env steps per CPU second)")

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("iql", "predator-prey", overrides=[*overrides, "steps=64", f"run_dir='{run_dir}'"])
        algo.train()  # builds the strategy; set up again below, it steps fresh envs with the trained agent
        strategy = algo.strategy
        strategy.setup()
        try:
            parts = _time_parts(strategy, args.chunks)
        finally:
            strategy.teardown()
    n = args.num_envs
    print(f"per env step ({args.scenario}, {n} env{'s' if n > 1 else ''}), us of CPU: 10th percentile / median "
          f"over {args.chunks} chunks of {CHUNK} steps")
    for name, values in parts.items():
        per_step = [v / (CHUNK * n) / 1000 for v in values]
        print(f"  {name:22s} {quantile(per_step, 0.1):7.2f} / {quantile(per_step, 0.5):7.2f}")


def _time_parts(strategy, chunks: int) -> dict[str, list[float]]:
    clock = time.thread_time_ns
    envs, agent, learner, tracker = strategy.envs, strategy.agent, strategy.learner, strategy.tracker
    n = envs.num_envs
    raw_envs = getattr(envs, "envs", [])
    own_step = {"ns": 0}
    for env in raw_envs:  # the env's own step (either protocol), timed inside the vector env's
        for method in ("step", "step_arrays"):
            original = getattr(env, method, None)
            if original is None:
                continue

            def timed(actions, original=original):
                start = clock()
                try:
                    return original(actions)
                finally:
                    own_step["ns"] += clock() - start

            setattr(env, method, timed)
    names = ("act", "vector env step", "  of it: env's own step", "learn", "tracking, exploration", "total")
    parts: dict[str, list[float]] = {name: [] for name in names}
    obs = strategy.obs
    random.seed(0)
    for _ in range(chunks):
        spent = dict.fromkeys(names, 0)
        own_step["ns"] = 0
        for _ in range(CHUNK):
            t0 = clock()
            acting = agent.act(obs, explore=True)
            t1 = clock()
            batch = envs.step(acting.actions)
            t2 = clock()
            learner.learn(Transitions(obs, acting.actions, batch.rewards, batch.next_obs, batch.terminated,
                                      batch.truncated, batch.alive, batch.episode_ended))
            t3 = clock()
            if batch.ended_envs:
                tracker.update(batch, agent.metrics())
                agent.reset_state(batch.episode_ended)
            else:
                tracker.update(batch)
            agent.on_progress(n, len(batch.ended_envs))
            t4 = clock()
            obs = batch.obs
            for name, value in (("act", t1 - t0), ("vector env step", t2 - t1), ("learn", t3 - t2),
                                ("tracking, exploration", t4 - t3), ("total", t4 - t0)):
                spent[name] += value
        spent["  of it: env's own step"] = own_step["ns"]
        for name in names:
            parts[name].append(spent[name])
    return parts


if __name__ == "__main__":
    main()

"""Tabular training throughput (IQL, CQL, Mixed) next to the raw predator-prey env, in one run.

    python benchmarks/tabular.py [--steps 20000] [--rounds 3] [--seed 0] [--cases chase-1v1,grid-3v3] [--num-envs 8]

For each scenario, and each with both teams learning (``learners=all``), it times:
  * env (raw):   the PettingZoo env stepped with uniformly random actions for the learning agents,
                 through its own API (no rlf), resets included: the ceiling for any learner;
  * rlf random:  `rlf.make("random").train()`: the core's off-policy loop with nothing to learn;
  * iql / cql / mixed: `rlf.make(...).train()` with default hyperparameters (epsilon from 1.0), so
    acting, the online table update, CSV curves and the final checkpoint are all in the time; the
    CPU time spent inside ``act`` and ``learn`` is measured separately (the rest is env + core).
Every timing is the best of ``--rounds`` (alternated, so drifting load hits every case alike), in
env steps per second of wall time and of this process's CPU time (the meaningful one on a loaded
machine). The ratio column is training speed / raw env speed (CPU), the raw env cut into as many
episodes as the run played; the target for IQL is >= 0.5.

CQL over all six agents of grid-3v3 needs 5**6 = 15625 Q-values per joint state, above the default
``max_joint_actions`` (3125): the default config refuses it, so that case runs with the limit raised
and ``--steps / 10`` steps (each new joint state costs 122 KiB).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import tempfile
import time

import numpy as np

import rlf

SCENARIOS = {"chase-1v1": ["env.scenario='chase-1v1'"], "grid-3v3": ["env.scenario='grid-3v3'"]}
ALGORITHMS = ["random", "iql", "cql", "mixed"]
HUGE_JOINT = ["algo.max_joint_actions=15625", "algo.max_table_mib=4096"]


def raw_env(overrides: list[str], steps: int, seed: int, episodes: int | None = None) -> tuple[float, float]:
    """(wall, CPU) env steps/s of random play. With ``episodes``, an episode is also cut (reset) after
    ``steps / episodes`` steps, so the env pays about as many resets as a training run that played
    ``episodes`` episodes: a learned chaser ends episodes sooner, and a reset costs ~5 steps (chase-1v1)."""
    resolved = rlf.resolve("random", "predator-prey", overrides=overrides)
    env = resolved.environment.build_env(resolved.env)
    names = list(env.possible_agents)
    actions = np.random.default_rng(seed).integers(5, size=(steps, len(names))).tolist()
    cut = steps / episodes if episodes else float("inf")
    env.reset(seed=seed)
    since_reset = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for row in actions:
        present = env.agents
        env.step({a: row[k] for k, a in enumerate(names) if a in present})
        since_reset += 1
        if not env.agents or since_reset >= cut:
            env.reset()
            since_reset = 0
    return steps / (time.perf_counter() - wall), steps / (time.process_time() - cpu)


class Timed:
    """Wraps a bound method and adds its CPU time to a shared total (the learner's share of a step)."""

    def __init__(self, method, totals: dict[str, float]):
        self.method, self.totals = method, totals

    def __call__(self, *args, **kwargs):
        start = time.process_time()
        try:
            return self.method(*args, **kwargs)
        finally:
            self.totals["learner"] += time.process_time() - start


def timed_registry(totals: dict[str, float]):
    """The installed registry, with every tabular algorithm's ``act`` and ``learn`` wrapped in ``Timed``."""
    registry = copy.copy(rlf.registry())
    registry.algorithms = dict(registry.algorithms)  # the process-wide registry stays untouched
    for name in ALGORITHMS:
        spec = registry.algorithms[name]

        def build_agent(context, build=spec.build_agent):
            agent = build(context)
            agent.act = Timed(agent.act, totals)
            return agent

        def build_learner(context, agent, build=spec.build_learner):
            learner = build(context, agent)
            learner.learn = Timed(learner.learn, totals)
            return learner

        registry.algorithms[name] = dataclasses.replace(spec, build_agent=build_agent, build_learner=build_learner)
    return registry


def train(algorithm: str, overrides: list[str], steps: int, seed: int, num_envs: int) -> dict[str, float]:
    """One training run, set-up and final checkpoint included: wall and CPU steps/s, episodes played,
    CPU microseconds per env step spent in ``act`` + ``learn``, and the final table size."""
    totals = {"learner": 0.0}
    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make(algorithm, "predator-prey", registry=timed_registry(totals), overrides=[
            *overrides, f"steps={steps}", f"seed={seed}", "progress=false",
            f"num_envs={num_envs}",
            "checkpoint_interval=0", f"log_interval={max(1000, steps // 10)}", f"run_dir='{run_dir}'"])
        wall, cpu = time.perf_counter(), time.process_time()
        algo.train()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        size = algo.strategy.agent.metrics().get("table_size", float("nan"))
    steps = algo.counters["env_steps"]
    return {"wall": steps / wall, "cpu": steps / cpu, "episodes": algo.counters["episodes"],
            "learner_us": 1e6 * totals["learner"] / steps, "table": size}


def cases(names: list[str]) -> list[tuple[str, list[str]]]:
    out = []
    for name in names:
        out.append((name, SCENARIOS[name]))
        out.append((f"{name} learners=all", [*SCENARIOS[name], "env.learners=all"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per timed run")
    parser.add_argument("--rounds", type=int, default=3, help="timings per case; the best is printed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", default="chase-1v1,grid-3v3", help="comma-separated scenarios")
    parser.add_argument("--num-envs", type=int, default=8,
                        help="envs stepped together in training runs (8: the iql/cql/mixed default)")
    args = parser.parse_args()

    print(f"num_envs={args.num_envs}; best of {args.rounds}; CPU = this process's CPU time\n")
    print(f"{'case':<24} {'runner':<10} {'steps/s':>8} {'cpu st/s':>9} {'episodes':>8} {'raw cpu st/s':>12} "
          f"{'ratio':>6} {'act+learn':>10} {'table':>7}")
    for case, overrides in cases(args.cases.split(",")):
        best: dict[str, dict[str, float]] = {}
        for _ in range(args.rounds):
            for runner in ["env (raw)", *ALGORITHMS]:
                extra, steps = [], args.steps
                if runner == "cql" and case == "grid-3v3 learners=all":
                    extra, steps = HUGE_JOINT, max(1000, args.steps // 10)
                if runner == "env (raw)":
                    wall, cpu = raw_env(overrides, steps, args.seed)
                    row = {"wall": wall, "cpu": cpu, "episodes": -1, "learner_us": float("nan"), "table": float("nan")}
                else:
                    row = train(runner, [*overrides, *extra], steps, args.seed, args.num_envs)
                row["raw"] = raw_env(overrides, steps, args.seed, row["episodes"] if row["episodes"] > 0 else None)[1]
                kept = best.setdefault(runner, row)
                if row["cpu"] / row["raw"] > kept["cpu"] / kept["raw"]:
                    best[runner] = row
        for runner, row in best.items():
            table = "-" if np.isnan(row["table"]) else f"{row['table']:,.0f}"
            episodes = "-" if row["episodes"] < 0 else f"{row['episodes']:,}"
            learner = "-" if np.isnan(row["learner_us"]) else f"{row['learner_us']:.1f} us"
            print(f"{case:<24} {runner:<10} {row['wall']:>8,.0f} {row['cpu']:>9,.0f} {episodes:>8} {row['raw']:>12,.0f} "
                  f"{row['cpu'] / row['raw']:>6.2f} {learner:>10} {table:>7}", flush=True)
    print("\nraw cpu st/s = the raw env (random actions) cut into as many episodes as the run played, since a\n"
          "learned chaser ends episodes sooner and resets cost more than steps; ratio = cpu st/s / raw cpu st/s.\n"
          "act+learn = CPU per env step inside the agent's act and the learner's learn (the rest is env + core).\n"
          "table = Q-table states at the end. CQL on grid-3v3 learners=all: max_joint_actions=15625, steps/10.")

if __name__ == "__main__":
    main()

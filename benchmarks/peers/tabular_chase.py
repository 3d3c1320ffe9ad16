"""Tabular independent Q-learning, every agent learning: PPAGE 0.9.2's own IQL on its own grid vs rlf's
iql on rlf-plugin-predator-prey, one env. Two scenarios:

* ``1v1`` (default): the 1v1 chase, 5x5, predator 2 cells per decision, prey 1, no obstacles, 50
  decisions per episode (rlf's ``chase-1v1``);
* ``3v3``: 3 predators and 3 prey on 10x10 with 20 % obstacles, every prey to be caught, 200 decisions
  (rlf's ``grid-3v3`` with ``obstacle_share=0.2``).

Same hyperparameters (alpha 0.1, gamma 0.99, epsilon 1.0 x 0.995 per episode down to 0.05), same
env-step budget, alternating rounds, fresh processes.

    python benchmarks/peers/tabular_chase.py                    # 1v1, 20k env steps (decisions) per run, 3 rounds
    python benchmarks/peers/tabular_chase.py --scenario 3v3     # the 3v3 grid with obstacles
    python benchmarks/peers/tabular_chase.py --num-envs 8       # rlf with 8 envs (PPAGE has one)
    python benchmarks/peers/tabular_chase.py --quick            # 1k steps, 1 round: does it run?

Run it with rlf's interpreter (rlf-plugin-iql and -predator-prey installed); PPAGE runs in its own venv,
made once with (nothing here installs anything):

    python3 -m venv /tmp/ppage && /tmp/ppage/bin/pip install ppage==0.9.2

PPAGE's grid differs in details (see plugins/predator_prey/README.md): its speed wrapper counts sub-steps
towards ``max_steps`` (so it gets 100 sub-steps = 50 decisions here) and its stamina would freeze a fast
predator after 5 moves (set out of reach here). An env step is one decision of every agent on both sides.
Both sides import their env's code before the timer. rlf's time includes building its envs, its
run directory, CSV and TensorBoard logging (importing tensorboardX) and the final checkpoint; PPAGE's
training loop writes nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    Case,
    UsageError,
    alternate,
    check_python,
    machine_line,
    main_guard,
    median,
    print_table,
    serve_worker,
)

PPAGE_VENV = "python3 -m venv /tmp/ppage && /tmp/ppage/bin/pip install ppage==0.9.2"
SCENARIOS = {
    # rlf overrides; PPAGE's grid: size, obstacle percentage, agents per side, speeds, decisions, captures
    "1v1": (["env.scenario='chase-1v1'"], {"size": 5, "obstacles": 0, "per_side": 1, "predator_speed": 2,
                                            "prey_speed": 1, "decisions": 50, "captures": 1, "sharing": True}),
    "3v3": (["env.scenario='grid-3v3'", "env.obstacle_share=0.2"],
            {"size": 10, "obstacles": 20, "per_side": 3, "predator_speed": 1, "prey_speed": 1, "decisions": 200,
             "captures": 3, "sharing": False}),
}
HYPERPARAMETERS = {"alpha": 0.1, "gamma": 0.99, "epsilon": 1.0, "epsilon_decay": 0.995, "min_epsilon": 0.05}


class _Budget(Exception):
    """Raised inside PPAGE's training loop when the env-step budget is spent (its loop counts episodes)."""


def ppage_worker(seed: int, threads: int, args: dict) -> dict:
    from ppage.baselines.IQL.iql import IQL
    from ppage.core.agent import Agent
    from ppage.core.gridworld import GridWorldEnv
    from ppage.registry.action_registry import get_action_space
    from ppage.wrappers.speed import SpeedWrapper

    _, grid_args = SCENARIOS[args.get("scenario", "1v1")]
    agents = []
    for k in range(grid_args["per_side"]):
        prey = Agent(agent_type="prey", agent_team=1, agent_name=f"prey_{k + 1}")
        predator = Agent(agent_type="predator", agent_team=1, agent_name=f"predator_{k + 1}")
        prey.agent_speed, predator.agent_speed = grid_args["prey_speed"], grid_args["predator_speed"]
        agents += [prey, predator]
    for agent in agents:
        agent.stamina = 10**9
    fastest = max(grid_args["prey_speed"], grid_args["predator_speed"])
    grid = GridWorldEnv(agents=agents, size=grid_args["size"], perc_num_obstacle=grid_args["obstacles"], seed=seed,
                        max_steps=grid_args["decisions"] * fastest, capture_threshold=grid_args["captures"],
                        allow_cell_sharing=grid_args["sharing"])
    grid.action_space_plugin = get_action_space("discrete_5")  # the speed wrapper needs its NOOP
    env = SpeedWrapper(grid)
    budget, counted = args["steps"], {"steps": 0, "episodes": 0}
    step, reset = env.step, env.reset

    def counting_step(actions):
        if counted["steps"] >= budget:
            raise _Budget
        counted["steps"] += 1
        return step(actions)

    def counting_reset(**kwargs):
        counted["episodes"] += 1
        return reset(**kwargs)

    env.step, env.reset = counting_step, counting_reset
    algo = IQL(env, {**HYPERPARAMETERS, "episodes": 10**9, "seed": seed, "action_dim": 5})
    start, cpu = time.perf_counter(), time.process_time()
    try:
        algo.train()
    except _Budget:
        pass
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"steps_per_second": counted["steps"] / seconds, "seconds": seconds,
            "cpu_steps_per_second": counted["steps"] / cpu,
            "episodes": counted["episodes"] - 1}  # minus the reset IQL's constructor does


def rlf_worker(seed: int, threads: int, args: dict) -> dict:
    import rlf_plugin_predator_prey.env  # noqa: F401 - the env's code (and PettingZoo), as PPAGE's grid is imported

    import rlf

    with tempfile.TemporaryDirectory() as run_dir:
        algo = rlf.make("iql", "predator-prey", overrides=[
            *SCENARIOS[args.get("scenario", "1v1")][0], "env.learners='all'", f"num_envs={args['num_envs']}",
            f"algo.alpha={HYPERPARAMETERS['alpha']}", f"algo.gamma={HYPERPARAMETERS['gamma']}",
            f"algo.exploration.start={HYPERPARAMETERS['epsilon']}",
            f"algo.exploration.decay={HYPERPARAMETERS['epsilon_decay']}",
            f"algo.exploration.end={HYPERPARAMETERS['min_epsilon']}",
            f"steps={args['steps']}", f"seed={seed}", "progress=false", "checkpoint_interval=0",
            f"run_dir='{run_dir}'"])
        start, cpu = time.perf_counter(), time.process_time()
        summary = algo.train()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"steps_per_second": args["steps"] / seconds, "seconds": seconds,
            "cpu_steps_per_second": args["steps"] / cpu,
            "episodes": int(summary.get("episodes", 0))}


WORKERS = {"ppage": ppage_worker, "rlf": rlf_worker}


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="env steps (decisions) per run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds = seeds (seed, seed+1, ...)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=1, help="rlf's envs (PPAGE steps one)")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="1v1",
                        help="1v1: 5x5 chase; 3v3: 10x10 with 20 %% obstacles")
    parser.add_argument("--ppage-python", default=os.environ.get("PPAGE_PYTHON", "/tmp/ppage/bin/python"))
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per run before it counts as failed")
    parser.add_argument("--quick", action="store_true", help="1,000 steps, 1 round: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.rounds = 1_000, 1
    if min(args.steps, args.rounds, args.num_envs) < 1:
        raise UsageError("--steps, --rounds and --num-envs must be at least 1")
    return args


def comparisons(args: argparse.Namespace, peer_python: str) -> dict[str, list[Case]]:
    """The compared sides: neither uses torch, so one thread each (OMP/MKL_NUM_THREADS=1 for numpy)."""
    return {args.scenario: [
        Case("PPAGE 0.9.2 IQL", peer_python, "ppage", {"steps": args.steps, "scenario": args.scenario},
             threads=1, peer=True),
        Case(f"rlf iql, {args.num_envs} env{'s' if args.num_envs > 1 else ''}", sys.executable, "rlf",
             {"steps": args.steps, "num_envs": args.num_envs, "scenario": args.scenario}, threads=1)]}


def main() -> None:
    if serve_worker(WORKERS):
        return
    args = arguments()
    ppage = check_python(args.ppage_python, "ppage", PPAGE_VENV)
    cases = comparisons(args, ppage)[args.scenario]
    print(machine_line())
    print(f"tabular IQL, {args.scenario}, every agent learning: {args.steps} env steps per run, {args.rounds} rounds",
          flush=True)
    results = alternate(Path(__file__), cases, args.rounds, args.seed, args.timeout)
    print_table(f"Tabular IQL, {args.scenario} ({'5x5 chase' if args.scenario == '1v1' else '10x10, 20 % obstacles'})", [
        ("env steps/s (median)", lambda rows: f"{median([r['steps_per_second'] for r in rows]):,.0f}"),
        ("episodes (median)", lambda rows: f"{median([r['episodes'] for r in rows]):,.0f}"),
    ], results, cases, "steps_per_second", machine_line())
    # On a loaded machine wall time mostly measures the scheduler; CPU time is what each side costs.
    print_table("The same runs in CPU time (train() only, this process)", [
        ("env steps per CPU second (median)", lambda rows: f"{median([r['cpu_steps_per_second'] for r in rows]):,.0f}"),
    ], results, cases, "cpu_steps_per_second", machine_line())


if __name__ == "__main__":
    main_guard(main)

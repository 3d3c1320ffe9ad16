"""The actor-critic family (actor-critic, a2c, a3c) on the predator-prey grid, side by side in one run.

    python benchmarks/actor_critic_family.py [--sections chase,sparse,numerics,ablations] [--seeds 0,1]
                                             [--episodes 2000] [--numerics-episodes 450]

Needs rlf-plugin-actor-critic, -a2c, -a3c and -predator-prey installed. Sections:

  chase      PPAGE's 1v1 chase (`chase-1v1`: 5x5, predator speed 2, max 50 steps) with BOTH agents
             learning, for --episodes episodes (the source's runs: 2000): the predator's capture rate
             over all episodes and over the last tenth, and mean steps to capture. The source reports
             A3C 58.8 % overall / 83.5 % in the last tenth, ActorCritic 25 % -> 75 %, A2C 28 % -> 74 %
             on its own version of this grid (its speed wrapper and stamina differ from ours, see the
             predator-prey README), so compare the trend, not the digits.
  sparse     predators learning against the random prey of `sparse-10x10` (the learning tests' task):
             env steps until 100 consecutive episodes first reach a 90 % capture rate, late capture rate
             and steps to capture, then a greedy evaluation.
  numerics   the full `grid-3v3` (max 200 steps) with both teams learning for --numerics-episodes
             episodes, where the source's A3C overflowed its return normaliser within ~450: largest
             |weight|, the range of the return stds, whether every logged loss stayed finite.
  ablations  what two choices of the actor-critic plugin buy: coupled L2 (Adam's weight_decay) instead
             of decoupled (AdamW) actor weight decay on `sparse-10x10`, and return normalisation without
             PopArt's output preservation on CartPole.

Each section also measures a uniformly random policy through the env's own API as the reference, and
prints wall time and env steps per second for every run (a loaded machine slows them all alike).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from rlf_plugin_predator_prey import random_play as play_randomly

import rlf

ALGORITHMS = ["actor-critic", "a2c", "a3c"]
# The synchronous two run 8 envs per update (their registered/tested setting); a3c runs 4 workers x 1 env.
RUN = {"actor-critic": ["num_envs=8"], "a2c": ["num_envs=8"], "a3c": ["num_envs=1"]}


def train(algorithm: str, env: str, overrides: list[str], seed: int) -> tuple[rlf.Algorithm, list[dict], float]:
    run_dir = Path(tempfile.mkdtemp(prefix=f"acf-{algorithm}-"))
    algo = rlf.make(algorithm, env, overrides=[*RUN[algorithm], *overrides, f"seed={seed}", "progress=false",
                                               "checkpoint_interval=0", "log_interval=5000",
                                               f"run_dir='{run_dir}'"])
    started = time.perf_counter()
    algo.train()
    wall = time.perf_counter() - started
    with open(run_dir / "episodes.csv") as handle:
        episodes = [{k: float(v) for k, v in row.items() if v} for row in csv.DictReader(handle)]
    return algo, episodes, wall


def random_play(overrides: list[str], episodes: int, seed: int = 0) -> list[dict]:
    """Episode rows of uniformly random learners through the env's PettingZoo API (no rlf training)."""
    return play_randomly(rlf.resolve("a2c", "predator-prey", overrides=overrides).env, episodes, seed)


def capture_stats(rows: list[dict]) -> tuple[float, float]:
    if not rows:
        return float("nan"), float("nan")
    captured = [r["length"] for r in rows if r.get("capture") == 1.0]
    return float(np.mean([r.get("capture", 0.0) for r in rows])), float(np.mean(captured)) if captured else float("nan")


def steps_to_reach(rows: list[dict], rate: float, window: int = 100) -> float:
    captures = np.array([r.get("capture", 0.0) for r in rows])
    if len(captures) < window:
        return float("nan")
    rolling = np.convolve(captures, np.ones(window) / window, mode="valid")
    hit = np.flatnonzero(rolling >= rate)
    return rows[hit[0] + window - 1]["env_step"] if len(hit) else float("nan")


def chase(args) -> None:
    overrides = ["env.scenario='chase-1v1'", "env.learners='all'"]
    print(f"\n## chase-1v1, both agents learning, first {args.episodes} episodes")
    print(f"{'algorithm':<14}{'seed':>5}{'episodes':>9}{'capture all':>12}{'last 10 %':>10}{'steps to capture':>17}"
          f"{'(last 10 %)':>12}{'wall s':>8}{'steps/s':>9}")
    rows = random_play(overrides, args.episodes)
    tenth = max(1, args.episodes // 10)
    print(f"{'random':<14}{'-':>5}{len(rows):>9}{capture_stats(rows)[0]:>12.3f}{capture_stats(rows[-tenth:])[0]:>10.3f}"
          f"{capture_stats(rows)[1]:>17.1f}{capture_stats(rows[-tenth:])[1]:>12.1f}")
    for algorithm in ALGORITHMS:
        for seed in args.seeds:
            # 30 steps per episode on average is a generous upper bound here; the rows are cut below.
            algo, episodes, wall = train(algorithm, "predator-prey", [*overrides, f"steps={30 * args.episodes}"],
                                         seed)
            first = episodes[:args.episodes]
            last = first[-tenth:]
            print(f"{algorithm:<14}{seed:>5}{len(first):>9}{capture_stats(first)[0]:>12.3f}{capture_stats(last)[0]:>10.3f}"
                  f"{capture_stats(first)[1]:>17.1f}{capture_stats(last)[1]:>12.1f}{wall:>8.0f}"
                  f"{algo.counters['env_steps'] / wall:>9.0f}")


def sparse(args) -> None:
    overrides = ["env.scenario='sparse-10x10'"]
    budget = {"actor-critic": 60_000, "a2c": 60_000, "a3c": 50_000}
    print("\n## sparse-10x10, predators learning against the random prey")
    print(f"{'algorithm':<14}{'seed':>5}{'steps':>7}{'steps to 90 %':>14}{'late capture':>13}{'late steps':>11}"
          f"{'greedy capture':>15}{'greedy steps':>13}{'wall s':>8}{'steps/s':>9}")
    rows = random_play(overrides, 500)
    rate, length = capture_stats(rows)
    print(f"{'random':<14}{'-':>5}{'-':>7}{'-':>14}{rate:>13.3f}{length:>11.1f}")
    for algorithm in ALGORITHMS:
        for seed in args.seeds:
            algo, episodes, wall = train(algorithm, "predator-prey", [*overrides, f"steps={budget[algorithm]}"], seed)
            late_rate, late_steps = capture_stats(episodes[-200:])
            greedy = algo.evaluate(episodes=100)
            print(f"{algorithm:<14}{seed:>5}{budget[algorithm]:>7}{steps_to_reach(episodes, 0.9):>14.0f}"
                  f"{late_rate:>13.3f}{late_steps:>11.1f}{greedy['capture']:>15.3f}"
                  f"{greedy.get('steps_to_capture', float('nan')):>13.1f}{wall:>8.0f}"
                  f"{algo.counters['env_steps'] / wall:>9.0f}")


def numerics(args) -> None:
    overrides = ["env.scenario='grid-3v3'", "env.learners='all'"]
    print(f"\n## grid-3v3 (max 200 steps), all six agents learning, >= {args.numerics_episodes} episodes")
    print(f"{'algorithm':<14}{'normalise':>10}{'episodes':>9}{'max |weight|':>13}{'return std range':>22}"
          f"{'losses finite':>14}{'capture':>9}{'wall s':>8}{'steps/s':>9}")
    for algorithm in ALGORITHMS:
        envs = 4 * 4 if algorithm == "a3c" else 16  # a3c: 4 workers x 4 envs
        # Enough for every env to finish its share of the episodes at 200 steps each, the longest.
        steps = 200 * (args.numerics_episodes + envs)
        for normalize in (True, False):
            algo, episodes, wall = train(algorithm, "predator-prey",
                                         [*overrides, f"steps={steps}", f"num_envs={envs if algorithm != 'a3c' else 4}",
                                          f"algo.normalize_returns={str(normalize).lower()}"], args.seeds[0])
            agent = algo.strategy.agent
            largest = max(float(p.detach().abs().max()) for net in agent.nets.values() for p in net.parameters())
            stds = [float(n.std) for n in agent.normalizers.values()]
            spread = f"{min(stds):.1f} .. {max(stds):.1f}" if stds else "-"
            with open(algo.run_dir / "metrics.csv") as handle:
                finite = all(np.isfinite(float(v)) for row in csv.DictReader(handle) for v in row.values() if v)
            print(f"{algorithm:<14}{normalize!s:>10}{len(episodes):>9}{largest:>13.2f}{spread:>22}{finite!s:>14}"
                  f"{capture_stats(episodes[-100:])[0]:>9.2f}{wall:>8.0f}{algo.counters['env_steps'] / wall:>9.0f}")


@contextmanager
def coupled_actor_weight_decay() -> Iterator[None]:
    """actor-critic's optimizer as Adam, whose weight_decay is L2 added to the gradient (coupled)."""
    import torch

    decoupled = torch.optim.AdamW
    torch.optim.AdamW = torch.optim.Adam
    try:
        yield
    finally:
        torch.optim.AdamW = decoupled


@contextmanager
def without_output_preservation() -> Iterator[None]:
    """Return statistics updated, the critic's output layer left alone: values jump when they move."""
    from rlf_plugin_actor_critic.model import ActorCriticAgent

    preserving = ActorCriticAgent.observe_returns
    ActorCriticAgent.observe_returns = lambda self, agent_id, returns: self.normalizers[agent_id].update(returns)
    try:
        yield
    finally:
        ActorCriticAgent.observe_returns = preserving


@contextmanager
def as_shipped() -> Iterator[None]:
    yield


def ablations(args) -> None:
    print("\n## actor-critic ablations")
    print(f"{'variant':<48}{'seed':>5}{'result':>46}{'wall s':>8}")
    sparse_env = ["env.scenario='sparse-10x10'", "steps=40000"]
    for name, variant in (("sparse-10x10, decoupled decay (shipped)", as_shipped),
                          ("sparse-10x10, coupled L2 decay", coupled_actor_weight_decay)):
        for seed in args.seeds:
            with variant():
                algo, episodes, wall = train("actor-critic", "predator-prey", sparse_env, seed)
            rate, length = capture_stats(episodes[-200:])
            reached = steps_to_reach(episodes, 0.9)
            when = "never" if np.isnan(reached) else f"after {reached:.0f} steps"
            text = f"90 % {when}; late {rate:.2f} in {length:.1f}"
            print(f"{name:<48}{seed:>5}{text:>46}{wall:>8.0f}")
    for name, variant in (("CartPole, PopArt output preservation (shipped)", as_shipped),
                          ("CartPole, statistics without preservation", without_output_preservation)):
        for seed in args.seeds:
            with variant():
                algo, episodes, wall = train("actor-critic", "gym:CartPole-v1", ["steps=30000"], seed)
            fifths = [np.mean([r["return"] for r in chunk]) for chunk in np.array_split(episodes, 5)]
            text = "train " + " ".join(f"{x:.0f}" for x in fifths) + f"; greedy {algo.evaluate(episodes=20)['return']:.0f}"
            print(f"{name:<48}{seed:>5}{text:>46}{wall:>8.0f}")


SECTIONS = {"chase": chase, "sparse": sparse, "numerics": numerics, "ablations": ablations}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default="chase,sparse,numerics,ablations")
    parser.add_argument("--seeds", default="0,1", help="comma-separated run seeds")
    parser.add_argument("--episodes", type=int, default=2000, help="episodes of the chase-1v1 runs")
    parser.add_argument("--numerics-episodes", type=int, default=450)
    args = parser.parse_args()
    args.seeds = [int(s) for s in args.seeds.split(",")]
    for section in args.sections.split(","):
        SECTIONS[section](args)


if __name__ == "__main__":
    main()

"""The learning test: PPO with its CartPole preset (presets/cartpole.toml, what `rlf train ppo` uses) solves
CartPole-v1 (mean return >= 475 over the last 20 training episodes) within 100,000 env steps,
for at least 2 of 3 seeds. It stops as soon as 2 seeds have passed."""

import csv
from pathlib import Path

import numpy as np

import rlf

BUDGET = 100_000
SOLVED = 475.0


def last_returns(run_dir: Path, count: int) -> list[float]:
    with (run_dir / "episodes.csv").open(newline="") as handle:
        return [float(row["return"]) for row in csv.DictReader(handle)][-count:]


def test_ppo_solves_cartpole_for_two_of_three_seeds(ppo_registry, tmp_path):
    results: dict[int, float] = {}
    for seed in (0, 1, 2):
        run_dir = tmp_path / f"seed{seed}"
        algo = rlf.make("ppo", registry=ppo_registry, preset=True, overrides=[
            f"seed={seed}", "progress=false", "checkpoint_interval=0", f"run_dir='{run_dir}'"])
        assert algo.resolved.preset == "rlf_plugin_ppo/presets/cartpole.toml"
        assert algo.config.run.steps == BUDGET and algo.config.run.env == "gym:CartPole-v1"
        algo.train()
        assert algo.counters["env_steps"] <= BUDGET
        returns = last_returns(run_dir, 20)
        assert len(returns) == 20
        results[seed] = float(np.mean(returns))
        if sum(mean >= SOLVED for mean in results.values()) == 2:
            break
    assert sum(mean >= SOLVED for mean in results.values()) >= 2, f"mean of the last 20 returns per seed: {results}"

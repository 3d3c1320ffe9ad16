"""Uniformly random play through the env's own PettingZoo API, with no rlf training machinery: the
baseline the learning tests and benchmarks measure trained agents against."""

from __future__ import annotations

import numpy as np

from .config import PredatorPreyConfig
from .env import make_env


def random_play(config: PredatorPreyConfig | dict, episodes: int, seed: int = 0) -> list[dict[str, float]]:
    """One row per episode: its ``length`` in decisions and the env's episode metrics (``capture``...).

    Episode k starts from ``reset(seed=seed + k)``; every learning agent draws its actions uniformly
    from one numpy Generator seeded with ``seed`` (the agents the config scripts are moved by the env).
    """
    env = make_env(config)
    rng = np.random.default_rng(seed)
    rows = []
    try:
        for episode in range(episodes):
            env.reset(seed=seed + episode)
            steps, infos = 0, {}
            while env.agents:
                _, _, _, _, infos = env.step({a: int(rng.integers(env.action_space(a).n)) for a in env.agents})
                steps += 1
            rows.append({"length": float(steps), **next(iter(infos.values()))["episode_metrics"]})
    finally:
        env.close()
    return rows


def capture_summary(rows: list[dict[str, float]]) -> dict[str, float]:
    """Capture rate, mean steps to capture over the captured episodes (nan if none) and mean length."""
    if not rows:
        return {"capture": float("nan"), "steps_to_capture": float("nan"), "length": float("nan")}
    captured = [row["length"] for row in rows if row["capture"] == 1.0]
    return {"capture": float(np.mean([row["capture"] for row in rows])),
            "steps_to_capture": float(np.mean(captured)) if captured else float("nan"),
            "length": float(np.mean([row["length"] for row in rows]))}

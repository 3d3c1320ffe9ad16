"""rlf's IQL run through the core (vector env, off-policy strategy, learner, episode tracking) learns
exactly what a textbook IQL loop written directly on the predator-prey env's PettingZoo API learns.

The reference below is the plain loop PPAGE's IQL is: per step, epsilon-greedy actions per agent, the
env step, ``Q(s,a) += alpha * (r + gamma * max Q(s') - Q(s,a))`` per agent that took part (only a true
terminal cuts the bootstrap), epsilon decayed per finished episode. It shares no code with rlf's
per-step path, so any shortcut taken there for speed (or any change of the maths) shows up as a
different table, episode or random stream.

What the reference has to know of rlf's conventions: env ``i`` is reset with ``seed + i`` once and
continues its own RNG after; actions are drawn agent by agent, env by env, from one
``random.Random(seed)`` (one draw against epsilon, one for a random action, one per tie); rewards
travel as float32; episodes ending at one step are counted in env order.
"""

from __future__ import annotations

import csv
import random

import numpy as np
import pytest
from rlf_plugin_iql import greedy
from rlf_plugin_predator_prey.env import make_env

import rlf

ALPHA, GAMMA, START, DECAY, END = 0.3, 0.9, 1.0, 0.97, 0.05


def textbook_iql(env_config, num_envs: int, steps: int, seed: int):
    envs = [make_env(env_config) for _ in range(num_envs)]
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    ids = list(envs[0].possible_agents)
    tables: dict[str, dict[tuple, list[float]]] = {a: {} for a in ids}
    rng = random.Random(seed)
    epsilon, finished = START, 0
    returns = [dict.fromkeys(ids, 0.0) for _ in envs]
    lengths = [0] * num_envs
    episodes = []

    def key(observation) -> tuple:
        return tuple(int(v) for v in np.asarray(observation, dtype=np.float32).tolist())

    def observed(i: int, a: str) -> np.ndarray:
        return obs[i].get(a, np.zeros(envs[i].observation_space(a).shape, dtype=np.float32))

    for _ in range(-(-steps // num_envs)):  # the budget counts env steps over all envs
        actions = [{} for _ in envs]
        for a in ids:  # every row acts, also an agent that left its episode early (its action is ignored)
            for i in range(num_envs):
                if rng.random() < epsilon:
                    actions[i][a] = int(rng.random() * 5)
                    continue
                row = tables[a].get(key(observed(i, a)))
                actions[i][a] = int(rng.random() * 5) if row is None else greedy(list(row), rng)
        ended = 0
        for i, env in enumerate(envs):
            present = list(env.agents)
            before = {a: key(observed(i, a)) for a in present}
            following, rewards, terminated, _, _ = env.step({a: actions[i][a] for a in present})
            for a in present:
                reward = float(np.float32(rewards[a]))
                returns[i][a] += reward
                q = tables[a].setdefault(before[a], [0.0] * 5)
                bootstrap = 0.0
                if not terminated[a]:
                    found = tables[a].get(key(following[a]))
                    bootstrap = max(found) if found is not None else 0.0
                q[actions[i][a]] += ALPHA * (reward + GAMMA * bootstrap - q[actions[i][a]])
            lengths[i] += 1
            obs[i] = following
            if not env.agents:
                episodes.append({"length": lengths[i], "epsilon": epsilon,
                                 **{f"return/{a}": returns[i][a] for a in ids}})
                returns[i], lengths[i] = dict.fromkeys(ids, 0.0), 0
                obs[i] = env.reset()[0]
                ended += 1
        if ended:
            finished += ended
            epsilon = max(END, START * DECAY**finished)
    return tables, episodes, rng.getstate()


@pytest.mark.parametrize(("scenario", "num_envs", "steps"), [
    (["env.scenario='chase-1v1'", "env.learners='all'"], 1, 4000),
    (["env.scenario='grid-3v3'", "env.obstacle_share=0.2", "env.learners='all'"], 3, 1500),
])
def test_rlf_iql_learns_what_the_textbook_loop_learns(scenario, num_envs, steps, tmp_path):
    seed = 5
    overrides = [*scenario, f"num_envs={num_envs}", f"steps={steps}", f"seed={seed}", f"algo.alpha={ALPHA}",
                 f"algo.gamma={GAMMA}", f"algo.exploration.start={START}", f"algo.exploration.decay={DECAY}",
                 f"algo.exploration.end={END}", "progress=false", "checkpoint_interval=0",
                 f"run_dir='{tmp_path / 'run'}'"]
    algo = rlf.make("iql", "predator-prey", overrides=overrides)
    algo.train()
    tables, episodes, rng_state = textbook_iql(rlf.resolve("iql", "predator-prey", overrides=overrides).env,
                                               num_envs, steps, seed)

    agent = algo.strategy.agent
    assert len(episodes) > 5  # episodes ended (and reset) along the way
    for a, table in agent.tables.items():
        learned = {k: table.values[row].tolist() for k, row in table.index.items()}
        assert learned == tables[a], a  # exact: the same updates in the same order
    assert agent.rng.getstate() == rng_state  # the same exploration draws
    with open(tmp_path / "run" / "episodes.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [{k: float(row[k]) for k in episodes[0]} for row in rows] == episodes

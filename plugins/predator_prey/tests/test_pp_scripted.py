"""The scripted opponents that drive the team that does not learn."""

import numpy as np
import pytest
from pp_support import cell, pinned

RIGHT, UP, LEFT, DOWN, STAY = range(5)


def manhattan(a, b):
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def test_stay_opponent_never_moves(make):
    env = make(size=6, opponent_policy="stay")
    pinned(env, [(0, 0)], [(4, 3)])
    for _ in range(10):
        env.step({"predator_0": UP})
        assert cell(env, "prey_0") == (4, 3)


def test_random_opponent_uses_every_action(make):
    env = make(size=9, opponent_policy="random")
    pinned(env, [(0, 0)], [(4, 4)], seed=3)
    moves = set()
    for _ in range(60):
        before = cell(env, "prey_0")
        env.step({})
        after = cell(env, "prey_0")
        moves.add((after[0] - before[0], after[1] - before[1]))
        if not env.agents:
            break
        if max(after) >= 7 or min(after) <= 1:  # keep it away from walls so every move shows
            pinned(env, [(0, 0)], [(4, 4)], seed=None)
    assert moves == {(1, 0), (0, 1), (-1, 0), (0, -1), (0, 0)}


def test_chasing_predators_close_in(make):
    env = make(size=8, n_predators=2, learners="prey", opponent_policy="chase")
    pinned(env, [(0, 0), (7, 7)], [(3, 4)])
    distances = []
    while env.agents:
        where = env.positions()
        distances.append(min(manhattan(where[p], where["prey_0"]) for p in ("predator_0", "predator_1")))
        _, rew, term, *_ = env.step({"prey_0": STAY})
    assert distances == sorted(distances, reverse=True) and distances[0] == 7
    assert term == {"prey_0": True} and rew == {"prey_0": -100.0} and env.num_steps == 7


def test_fleeing_prey_keeps_away(make):
    env = make(size=7, opponent_policy="flee")
    pinned(env, [(3, 3)], [(4, 3)])
    env.step({"predator_0": STAY})
    assert manhattan(cell(env, "predator_0"), cell(env, "prey_0")) == 2
    # a stationary predator cannot catch a fleeing prey, which ends up in a corner
    for _ in range(10):
        env.step({"predator_0": STAY})
    assert cell(env, "prey_0") in {(0, 0), (6, 0), (0, 6), (6, 6)}
    assert env.captures == 0


def test_flee_beats_random_and_chase_beats_random(make):
    def capture_rate(**fields):
        env = make(scenario="chase-1v1", **fields)
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        caught = 0
        for _ in range(150):
            env.reset()
            while env.agents:
                _, _, _, _, infos = env.step({a: int(rng.integers(5)) for a in env.agents})
            caught += next(iter(infos.values()))["episode_metrics"]["capture"]
        return caught / 150

    assert capture_rate(opponent_policy="flee") < capture_rate(opponent_policy="random") - 0.1
    assert capture_rate(learners="prey", opponent_policy="chase") > capture_rate(learners="prey") + 0.1


def test_noise_makes_a_stay_policy_move(make):
    env = make(size=9, opponent_policy="stay", opponent_noise=1.0, max_steps=200)
    pinned(env, [(0, 0)], [(4, 4)], seed=1)
    seen = set()
    for _ in range(20):
        env.step({})
        seen.add(cell(env, "prey_0"))
        if not env.agents:
            break
    assert len(seen) > 3


@pytest.mark.parametrize("policy", ["random", "stay", "flee", "chase"])
def test_scripted_team_is_not_an_agent(make, policy):
    env = make(scenario="grid-3v3", opponent_policy=policy)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"predator_0", "predator_1", "predator_2"}
    with pytest.raises(ValueError, match="unknown agent"):
        env.step({"prey_0": 0})

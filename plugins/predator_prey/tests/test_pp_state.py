"""rlf's env state protocol: a copy built from the same config and given ``get_state()`` continues
exactly, through a real checkpoint file (JSON and arrays, no pickle), across captures and resets."""

import numpy as np
import pytest

from rlf import StatefulEnv
from rlf.storage import checkpoint as ckpt


def trace(env, rng, steps):
    out = []
    for _ in range(steps):
        obs, rew, term, trunc, info = env.step({a: int(rng.integers(5)) for a in env.agents})
        out.append((sorted(env.positions().items()), {a: o.tolist() for a, o in obs.items()}, rew, term, trunc,
                    info, env.captured_prey))
        if not env.agents:
            obs, _ = env.reset()
            out.append((sorted(env.positions().items()), sorted(env.obstacle_cells), {a: o.tolist() for a, o in obs.items()}))
    return out


@pytest.mark.parametrize("fields", [
    {"scenario": "grid-3v3"},
    {"scenario": "grid-3v3", "learners": "prey", "opponent_policy": "chase", "opponent_noise": 0.2},
    {"scenario": "grid-3v3", "observation": "local", "learners": "all", "obstacle_share": 0.3},
])
def test_a_restored_copy_continues_exactly(make, fields, tmp_path):
    env = make(**fields)
    assert isinstance(env, StatefulEnv)
    env.reset(seed=3)
    rng = np.random.default_rng(1)
    trace(env, rng, 23)
    ckpt.save(tmp_path / "env.rlf", {"env": env.get_state()})
    copy = make(**fields)  # never reset: the state is all it needs
    copy.set_state(ckpt.load(tmp_path / "env.rlf")["env"])
    assert copy.agents == env.agents and copy.num_steps == env.num_steps
    state = rng.bit_generator.state
    expected = trace(env, rng, 400)
    rng.bit_generator.state = state
    assert trace(copy, rng, 400) == expected


def test_a_state_before_the_first_reset_restores_an_unstarted_env(make):
    copy = make(scenario="grid-3v3")
    copy.set_state(make(scenario="grid-3v3").get_state())
    assert copy.agents == []
    with pytest.raises(RuntimeError, match="call reset"):
        copy.step({})


def test_a_state_from_another_grid_is_refused(make):
    small = make(scenario="grid-3v3", size=5)
    small.reset(seed=0)
    with pytest.raises(ValueError, match="another grid"):
        make(scenario="grid-3v3", size=8).set_state(small.get_state())

"""render(): an RGB array and a text grid."""

import numpy as np
import pytest
from pp_support import pinned
from rlf_plugin_predator_prey.env import CELL_PX


def test_rgb_array(make):
    env = make(size=6, render_mode="rgb_array", n_prey=2, capture_threshold=2, opponent_policy="stay")
    pinned(env, [(0, 0)], [(5, 5), (1, 0)], obstacles=[(3, 3)])
    frame = env.render()
    assert frame.shape == (6 * CELL_PX, 6 * CELL_PX, 3) and frame.dtype == np.uint8

    def centre(x, y):  # image row 0 is the top of the grid (y = size - 1)
        return frame[(5 - y) * CELL_PX + CELL_PX // 2, x * CELL_PX + CELL_PX // 2].tolist()

    assert centre(0, 0) == [200, 40, 40]      # predator
    assert centre(5, 5) == [40, 150, 60]      # prey
    assert centre(3, 3) == [70, 70, 78]       # obstacle
    assert centre(2, 4) == [236, 236, 230]    # floor
    env.step({"predator_0": 0})
    frame = env.render()
    assert centre(1, 0) == [200, 40, 40]      # the predator covers the prey it caught
    assert frame[(5 - 0) * CELL_PX + 7, 1 * CELL_PX + 3].tolist() == [200, 40, 40]


def test_ansi_text(make):
    env = make(size=4, render_mode="ansi", n_prey=2, capture_threshold=2, max_steps=9, opponent_policy="stay")
    pinned(env, [(0, 0)], [(3, 3), (1, 0)], obstacles=[(2, 1)])
    assert env.render() == "\n".join([
        "step 0/9  captures 0/2",
        ". . . o",
        ". . . .",
        ". . # .",
        "P o . .",
    ])
    env.step({"predator_0": 0})  # catches the prey at (1, 0)
    env.step({"predator_0": 1})
    text = env.render().splitlines()
    assert text[0] == "step 2/9  captures 1/2" and text[3] == ". P # ." and text[4] == ". x . ."


def test_render_without_mode_returns_none(make):
    env = make()
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None


def test_human_mode_prints(make, capsys):
    env = make(render_mode="human", size=3)
    env.reset(seed=0)
    env.step({})
    assert "step 1/100" in capsys.readouterr().out

"""Movement, capture, termination, truncation and rewards, on pinned layouts."""

import pytest
from pp_support import cell, pinned, reachable

RIGHT, UP, LEFT, DOWN, STAY = range(5)


def test_capture_terminates_everyone_with_base_rewards(make):
    env = make(size=5, learners="all")
    pinned(env, [(1, 1)], [(2, 1)])
    obs, rew, term, trunc, infos = env.step({"predator_0": RIGHT, "prey_0": STAY})
    assert rew == {"predator_0": 95.0, "prey_0": -100.0}  # +100 capture -5 step; -100 captured
    assert term == {"predator_0": True, "prey_0": True} and trunc == {"predator_0": False, "prey_0": False}
    assert env.agents == [] and set(obs) == {"predator_0", "prey_0"}
    for agent in ("predator_0", "prey_0"):
        assert infos[agent]["episode_metrics"] == {"capture": 1.0, "captures": 1.0, "steps_to_capture": 1.0}
    assert env.captured_prey == ["prey_0"]


def test_step_cost_without_capture_and_no_metrics_mid_episode(make):
    env = make(size=5, learners="all")
    pinned(env, [(0, 0)], [(4, 4)])
    _, rew, term, trunc, infos = env.step({"predator_0": RIGHT, "prey_0": LEFT})
    assert rew == {"predator_0": -5.0, "prey_0": 0.0}
    assert not any(term.values()) and not any(trunc.values()) and infos == {"predator_0": {}, "prey_0": {}}
    assert cell(env, "predator_0") == (1, 0) and cell(env, "prey_0") == (3, 4)


def test_reward_weights_are_configurable(make):
    env = make(size=5, learners="all", rewards={"capture": 10, "step": -1, "captured": -7, "prey_step": 0.5})
    pinned(env, [(0, 0)], [(4, 4)])
    assert env.step({})[1] == {"predator_0": -1.0, "prey_0": 0.5}
    pinned(env, [(0, 0)], [(1, 0)])
    assert env.step({"predator_0": RIGHT})[1] == {"predator_0": 9.0, "prey_0": -7.0}


def test_truncation_counts_decisions(make):
    env = make(size=5, max_steps=3, learners="all", predator_speed=2)
    pinned(env, [(0, 0)], [(4, 4)])
    for _ in range(2):
        _, _, term, trunc, infos = env.step({})
        assert not any(trunc.values()) and env.agents
    _, _, term, trunc, infos = env.step({})
    assert trunc == {"predator_0": True, "prey_0": True} and term == {"predator_0": False, "prey_0": False}
    assert env.agents == [] and env.num_steps == 3
    assert infos["predator_0"]["episode_metrics"] == {"capture": 0.0, "captures": 0.0}


def test_missing_action_means_stay(make):
    env = make(size=5, learners="all")
    pinned(env, [(2, 2)], [(4, 4)])
    env.step({"prey_0": UP})
    assert cell(env, "predator_0") == (2, 2) and cell(env, "prey_0") == (4, 4)  # clipped at the top wall


@pytest.mark.parametrize(("action", "start", "end"), [
    (RIGHT, (4, 2), (4, 2)), (UP, (2, 4), (2, 4)), (LEFT, (0, 2), (0, 2)), (DOWN, (2, 0), (2, 0)),
    (RIGHT, (2, 2), (3, 2)), (UP, (2, 2), (2, 3)), (LEFT, (2, 2), (1, 2)), (DOWN, (2, 2), (2, 1)),
])
def test_moves_and_walls(make, action, start, end):
    env = make(size=5, opponent_policy="stay")
    pinned(env, [start], [(0, 4) if start != (0, 4) else (4, 0)])
    env.step({"predator_0": action})
    assert cell(env, "predator_0") == end


def test_obstacles_block_moves(make):
    env = make(size=5, opponent_policy="stay")
    pinned(env, [(2, 2)], [(4, 4)], obstacles=[(3, 2), (2, 3)])
    env.step({"predator_0": RIGHT})
    assert cell(env, "predator_0") == (2, 2)
    env.step({"predator_0": UP})
    assert cell(env, "predator_0") == (2, 2)
    env.step({"predator_0": LEFT})
    assert cell(env, "predator_0") == (1, 2)
    assert sorted(env.obstacle_cells) == [(2, 3), (3, 2)]


def test_random_layouts_keep_agents_off_obstacles_and_connected(make):
    env = make(scenario="grid-3v3", obstacle_share=0.4)
    env.reset(seed=0)
    for _ in range(30):
        env.reset()
        obstacles = set(env.obstacle_cells)
        assert len(obstacles) == 40
        spots = list(env.positions().values())
        assert len(set(spots)) == 6 and not obstacles & set(spots)
        assert set(spots) <= reachable(10, obstacles, spots[0])


def test_min_start_distance(make):
    env = make(size=6, n_predators=2, n_prey=2, min_start_distance=5)
    env.reset(seed=1)
    for _ in range(50):
        env.reset()
        where = env.positions()
        for p in ("predator_0", "predator_1"):
            for q in ("prey_0", "prey_1"):
                assert abs(where[p][0] - where[q][0]) + abs(where[p][1] - where[q][1]) >= 5


def test_speed_two_moves_two_cells_per_decision(make):
    env = make(size=6, predator_speed=2, prey_speed=1, learners="all")
    pinned(env, [(0, 0)], [(5, 5)])
    env.step({"predator_0": RIGHT, "prey_0": LEFT})
    assert cell(env, "predator_0") == (2, 0) and cell(env, "prey_0") == (4, 5)
    env.step({"predator_0": UP, "prey_0": DOWN})
    assert cell(env, "predator_0") == (2, 2) and cell(env, "prey_0") == (4, 4)
    assert env.num_steps == 2


def test_fast_predator_captures_on_the_cell_it_passes(make):
    env = make(size=6, predator_speed=2, learners="all")
    pinned(env, [(0, 0)], [(1, 0)])
    _, rew, term, *_ = env.step({"predator_0": RIGHT, "prey_0": STAY})
    assert term["prey_0"] and rew["predator_0"] == 95.0
    assert cell(env, "predator_0") == (2, 0)  # the move is finished; the prey stays frozen where it was caught
    assert cell(env, "prey_0") == (1, 0)


def test_fast_predator_catches_in_its_second_sub_step(make):
    env = make(size=6, predator_speed=2, learners="all")
    pinned(env, [(0, 0)], [(3, 0)])
    _, _, term, *_ = env.step({"predator_0": RIGHT, "prey_0": LEFT})
    # sub-step 1: predator (1, 0), prey (2, 0); sub-step 2: only the predator moves, onto the prey
    assert all(term.values()) and cell(env, "predator_0") == cell(env, "prey_0") == (2, 0)


def test_swapping_cells_is_not_a_capture(make):
    env = make(size=5, learners="all")
    pinned(env, [(1, 1)], [(2, 1)])
    _, _, term, *_ = env.step({"predator_0": RIGHT, "prey_0": LEFT})
    assert not any(term.values())
    assert cell(env, "predator_0") == (2, 1) and cell(env, "prey_0") == (1, 1)


def test_every_prey_on_a_cell_is_captured_and_every_predator_credited(make):
    env = make(size=5, n_predators=3, n_prey=3, capture_threshold=3, learners="all")
    pinned(env, [(1, 2), (3, 2), (0, 0)], [(2, 2), (2, 3), (4, 4)])
    _, rew, term, trunc, infos = env.step({"predator_0": RIGHT, "predator_1": LEFT, "prey_1": DOWN})
    assert rew["predator_0"] == rew["predator_1"] == 95.0 and rew["predator_2"] == -5.0
    assert rew["prey_0"] == rew["prey_1"] == -100.0 and rew["prey_2"] == 0.0
    assert term["prey_0"] and term["prey_1"] and not term["prey_2"] and not term["predator_0"]
    assert sorted(env.agents) == ["predator_0", "predator_1", "predator_2", "prey_2"]
    assert env.captures == 2 and infos["prey_0"] == {}


def test_captured_prey_leave_frozen_and_threshold_counts_all_captures(make):
    env = make(size=5, n_prey=2, capture_threshold=2, learners="all")
    obs, *_ = pinned(env, [(0, 0)], [(1, 0), (4, 4)])
    obs, rew, term, trunc, _ = env.step({"predator_0": RIGHT, "prey_0": STAY, "prey_1": STAY})
    assert term == {"predator_0": False, "prey_0": True, "prey_1": False}
    assert "prey_0" in obs and "prey_0" not in env.agents
    captured_at = cell(env, "prey_0")
    # the captured prey's action is ignored, it stays frozen and no longer counts as an opponent
    obs, rew, term, *_ = env.step({"predator_0": RIGHT, "prey_0": UP, "prey_1": STAY})
    assert set(obs) == {"predator_0", "prey_1"} and cell(env, "prey_0") == captured_at
    pinned(env, [(3, 3)], [(3, 4), (2, 3)])
    env.step({"predator_0": UP, "prey_0": STAY, "prey_1": STAY})
    _, _, term, _, infos = env.step({"predator_0": DOWN, "prey_1": RIGHT})  # both step onto (3, 3)
    assert term == {"predator_0": True, "prey_1": True} and env.agents == []
    assert infos["prey_1"]["episode_metrics"] == {"capture": 1.0, "captures": 2.0, "steps_to_capture": 2.0}


def test_same_role_agents_may_share_a_cell_by_default(make):
    env = make(size=5, n_predators=2, opponent_policy="stay")
    pinned(env, [(1, 1), (3, 1)], [(4, 4)])
    env.step({"predator_0": RIGHT, "predator_1": LEFT})
    assert cell(env, "predator_0") == cell(env, "predator_1") == (2, 1)


def test_same_role_collisions_are_cancelled_when_sharing_is_off(make):
    env = make(size=5, n_predators=3, allow_same_role_sharing=False, opponent_policy="stay")
    pinned(env, [(1, 1), (3, 1), (0, 1)], [(4, 4)])
    env.step({"predator_0": RIGHT, "predator_1": LEFT, "predator_2": RIGHT})
    # 0 and 1 both aimed at (2, 1): both stay; then 2's move into 0's cell is cancelled as well
    assert [cell(env, f"predator_{i}") for i in range(3)] == [(1, 1), (3, 1), (0, 1)]
    env.step({"predator_0": RIGHT, "predator_1": STAY, "predator_2": RIGHT})
    assert [cell(env, f"predator_{i}") for i in range(3)] == [(2, 1), (3, 1), (1, 1)]
    env.step({"predator_0": RIGHT, "predator_1": LEFT})  # a swap is allowed
    assert [cell(env, f"predator_{i}") for i in range(3)] == [(3, 1), (2, 1), (1, 1)]


def test_cross_role_sharing_is_always_a_capture(make):
    env = make(size=5, n_prey=2, capture_threshold=2, allow_same_role_sharing=False, learners="all")
    pinned(env, [(2, 2)], [(1, 2), (3, 3)])
    _, _, term, *_ = env.step({"prey_0": RIGHT, "prey_1": STAY})
    assert term["prey_0"] and not term["prey_1"] and env.captures == 1
    # two prey aiming at the same cell (the predator's) collide first: both moves are cancelled
    pinned(env, [(2, 2)], [(1, 2), (3, 2)])
    _, _, term, *_ = env.step({"prey_0": RIGHT, "prey_1": LEFT})
    assert not any(term.values()) and env.captures == 0


def test_disconnected_layouts_only_without_connected_layout(make):
    def cut_off(**fields):
        env = make(scenario="grid-3v3", obstacle_share=0.45, **fields)
        env.reset(seed=0)
        count = 0
        for _ in range(60):
            env.reset()
            spots = list(env.positions().values())
            assert len(env.obstacle_cells) == 45 and not set(spots) & set(env.obstacle_cells)
            count += not set(spots) <= reachable(10, env.obstacle_cells, spots[0])
        return count

    assert cut_off() == 0 and cut_off(connected_layout=False) > 5


def test_dense_grids_fall_back_to_a_grown_connected_layout(make):
    env = make(scenario="grid-3v3", size=16, obstacle_share=0.5)
    env.reset(seed=2)
    for _ in range(10):
        env.reset()
        spots = list(env.positions().values())
        assert len(env.obstacle_cells) == 128 and not set(spots) & set(env.obstacle_cells)
        assert set(spots) <= reachable(16, env.obstacle_cells, spots[0])

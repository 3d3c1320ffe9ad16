"""scripts/mario_results.py: the per-env-step comparison of two algorithms' seeds (issue 25's APPO against
PPO) reads the same window of every run, and a page without the generated section's markers is refused."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("mario_results", ROOT / "scripts" / "mario_results.py")
mario_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mario_results)

HEADER = "env_step,episode,length,return,x_pos_max,flag,level_finished,raw_return,shaped_return\n"


def write_run(path: Path, episodes: list[tuple[int, float, int]]) -> None:
    path.mkdir(parents=True)
    lines = [f"{step},{i},10,1.0,{x},{flag},{flag},1.0,1.0" for i, (step, x, flag) in enumerate(episodes)]
    (path / "episodes.csv").write_text(HEADER + "\n".join(lines) + "\n")


def test_window_is_the_shortest_run_and_each_point_averages_the_episodes_before_it(tmp_path):
    game = tmp_path / "game"
    # ppo: x = 100 up to 200 steps, then 300; it runs on to 1,000 steps, past the window.
    write_run(game / "ppo-seed0", [(s, 100 if s <= 200 else 300, 0) for s in range(100, 1001, 100)])
    write_run(game / "ppo-seed1", [(s, 100 if s <= 200 else 300, 1 if s == 300 else 0) for s in range(100, 1001, 100)])
    # appo stops at 400 env steps: the window of every run ends there.
    write_run(game / "appo-seed0", [(s, 50 * s // 100, 1 if s == 400 else 0) for s in range(100, 401, 100)])
    lines = mario_results.per_step_comparison(game, "ppo", "appo", last=2, milestones=2)
    assert "first 400 env steps" in lines[0]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in lines if line.startswith("| ppo")
            or line.startswith("| appo")}
    ppo, appo = rows["ppo"], rows["appo"]
    assert ppo[1] == "2" and appo[1] == "1"
    assert ppo[2] == "100"                      # last 2 episodes before step 200: x 100, 100 (both seeds)
    assert ppo[3].startswith("300 [300, 300]")  # before 400: steps 300 and 400, x 300; nothing after 400 counts
    assert appo[2] == "75" and appo[3].startswith("175 [150, 200]")
    assert ppo[4] == "1 of 8" and ppo[5].strip(" |") == "none, 300"
    assert appo[4] == "1 of 4" and appo[5].strip(" |") == "400"


def test_no_comparison_until_both_algorithms_have_a_run(tmp_path):
    write_run(tmp_path / "game" / "ppo-seed0", [(100, 1.0, 0)])
    assert mario_results.per_step_comparison(tmp_path / "game", "ppo", "appo") == []


def test_a_page_without_markers_is_refused_and_left_as_it_was(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("# results\n")
    (tmp_path / "runs").mkdir()
    assert mario_results.main(["--runs", str(tmp_path / "runs"), "--page", str(page)]) == 2
    assert "no <!-- series:begin -->" in capsys.readouterr().err
    assert page.read_text() == "# results\n"


def test_game_tables_take_the_random_floor_from_the_no_reward_runs(tmp_path):
    runs = tmp_path / "runs"
    for name in ("game/dqn-seed0", "game/ppo-seed0", "none/random-seed0", "none/random-seed1", "none/ppo-seed0",
                 "none/knn-seed0"):
        (runs / name).mkdir(parents=True)
        (runs / name / "run.json").write_text("{}")
    (runs / "none" / "knn-seed1").mkdir()  # not started yet: no run.json, no row
    game = [p.relative_to(runs).as_posix() for p in mario_results.setting_paths(runs, "game")]
    none = [p.relative_to(runs).as_posix() for p in mario_results.setting_paths(runs, "none")]
    assert game == ["game/dqn-seed0", "game/ppo-seed0", "none/random-seed0", "none/random-seed1"]
    assert none == ["none/knn-seed0", "none/ppo-seed0", "none/random-seed0", "none/random-seed1"]
    # game-reward random runs of its own, once there are any, are the floor instead of the borrowed ones
    (runs / "game" / "random-seed0").mkdir()
    (runs / "game" / "random-seed0" / "run.json").write_text("{}")
    game = [p.relative_to(runs).as_posix() for p in mario_results.setting_paths(runs, "game")]
    assert game == ["game/dqn-seed0", "game/ppo-seed0", "game/random-seed0"]


def test_no_game_table_without_a_game_run(tmp_path):
    (tmp_path / "none" / "random-seed0").mkdir(parents=True)
    (tmp_path / "none" / "random-seed0" / "run.json").write_text("{}")
    assert mario_results.setting_paths(tmp_path, "game") == []

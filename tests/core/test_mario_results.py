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


def write_full_run(path: Path, *, seed: int, rate: float, steps: int, until: dict | None, flags_eval: int,
                   algo: dict | None = None) -> None:
    """A run directory as `rlf experiment` leaves it: run.json, metrics, episodes, the done marker, an evaluation."""
    import json

    write_run(path, [(steps // 2, 500.0, 0), (steps, 900.0, 1)])
    config = {"run": {"algorithm": "ppo", "env": "mario", "seed": seed}, "algo": algo or {"lr": 1e-4}, "env": {}}
    (path / "run.json").write_text(json.dumps({"config": config}))
    half = steps // 2
    (path / "metrics.csv").write_text(f"env_step,steps_per_second\n{half},{rate}\n{steps},{rate}\n")
    (path / "experiment.json").write_text(json.dumps({"env_steps": steps, "finished_at": 0.0, **(
        {"until": until} if until else {})}))
    rows = [f"{i},{i},100,1.0,{3000 if i < flags_eval else 800},{int(i < flags_eval)},0,1.0,1.0" for i in range(20)]
    (path / "final_eval_stochastic.csv").write_text(HEADER + "\n".join(rows) + "\n")


def test_a_cleared_run_records_the_step_and_training_wall_of_its_check_and_its_evaluation(tmp_path):
    check = {"metric": "flag", "value": 0.55, "target": 0.5, "mode": "stochastic", "episodes": 20}
    write_full_run(tmp_path / "game" / "i64-seed3", seed=3, rate=100.0, steps=409_600, until=check, flags_eval=11)
    write_full_run(tmp_path / "game" / "cvh-seed3", seed=3, rate=50.0, steps=1_000_000, until=None, flags_eval=2)
    records = {r["arm"]: r for r in mario_results.summary([("fast", tmp_path), ("absent", tmp_path / "nope")])}
    cleared, capped = records["i64"], records["cvh"]
    assert cleared["experiment"] == "fast" and cleared["setting"] == "game" and cleared["seed"] == 3
    assert cleared["cleared_at_env_step"] == 409_600 and cleared["env_steps"] == 409_600
    assert cleared["wall_s"] == cleared["cleared_at_wall_s"] == 4096.0   # 409,600 steps at 100 per second
    assert cleared["evaluations"]["stochastic"] == {"episodes": 20, "flags": 11, "mean_x_pos_max": 2010.0}
    assert cleared["training_flags"] == 1 and cleared["first_training_flag_at"] == 409_600
    assert capped["cleared_at_env_step"] is None and capped["cleared_at_wall_s"] is None
    assert capped["wall_s"] == 20_000.0 and capped["evaluations"]["stochastic"]["flags"] == 2


def test_the_trial_table_lists_what_each_trial_changes_from_the_baseline(tmp_path):
    series, fast = tmp_path / "series", tmp_path / "fast"
    write_full_run(series / "game" / "ppo-seed0", seed=0, rate=70.0, steps=2_000_000,
                   until={"metric": "flag", "value": 0.6}, flags_eval=12, algo={"lr": 1e-4, "minibatches": 16})
    write_full_run(fast / "game" / "i64-seed0", seed=0, rate=100.0, steps=1_000_000, until=None, flags_eval=3,
                   algo={"lr": 1e-4, "minibatches": 32, "overlap_update": False})
    (fast / "game" / "i64-seed0" / "checks.csv").write_text(
        "env_step,metric,value,target,mode,episodes,reached,time\n500000,flag,0.05,0.5,stochastic,20,0,0\n"
        "1000000,flag,0.3,0.5,stochastic,20,0,0\n")
    table = mario_results.trial_table(fast, series)
    rows = [line for line in table.splitlines() if line.startswith("| baseline") or line.startswith("| i64")]
    assert "**2,000,000**" in rows[0] and "12 of 20" in rows[0]
    # overlap_update is absent from the older baseline's run.json and off in the trial: not a change
    assert "| minibatches=32 |" in rows[1] and "not by 1,000,000" in rows[1] and "3 of 20" in rows[1]
    assert rows[1].endswith("| 0.05, 0.3 |") and rows[0].endswith("| - |")


def test_the_results_page_headline_is_the_summary_file():
    """The clears the page states in prose are the committed summary's records."""
    import json
    import re

    records = json.loads((ROOT / "docs" / "results" / "mario-1-1-summary.json").read_text())["runs"]
    page = (ROOT / "docs" / "results" / "mario-1-1.md").read_text()
    claims = re.findall(r"Seed (\d) reached it at\s+([\d,]+)\s+env steps:\s+(\d+) of (\d+)", page)
    assert len(claims) == 2
    for seed, step, flags_, episodes in claims:
        [record] = [r for r in records if (r["experiment"], r["setting"], r["arm"], r["seed"])
                    == ("mario-1-1", "game", "ppo", int(seed))]
        assert record["cleared_at_env_step"] == int(step.replace(",", ""))
        assert record["evaluations"]["stochastic"] == {**record["evaluations"]["stochastic"],
                                                       "flags": int(flags_), "episodes": int(episodes)}

"""`rlf experiment`, `rlf compare` and `rlf plot` through the command line on real plugins: random and
tabular IQL on predator-prey, compared on the env's own episode metric `capture`."""

from __future__ import annotations

import json

from rlf.cli.commands import main

EXPERIMENT = """
[experiment]
env = "predator-prey"
steps = 256
seeds = [0, 1]
runs_dir = "{runs}"
metrics = ["capture", "steps_to_capture"]
last = 50
eval_episodes = 2

[run]
log_interval = 64
checkpoint_interval = 128

[env]
size = 4
max_steps = 25

[algorithms.random]
[algorithms.random.run]
num_envs = 2

[algorithms.iql]
seeds = [0]
"""


def test_predator_prey_experiment_compare_and_plot(tmp_path, capsys):
    path = tmp_path / "pp.toml"
    runs = tmp_path / "runs"
    path.write_text(EXPERIMENT.format(runs=runs))
    assert main(["experiment", str(path)]) == 0
    assert sorted(p.name for p in (runs / "default").iterdir() if p.is_dir()) == [
        "iql-seed0", "random-seed0", "random-seed1"]
    assert "random on predator-prey" in (runs / "compare.md").read_text()
    assert (runs / "curves.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()

    assert main(["compare", str(runs), "--metric", "capture", "--format", "json"]) == 0
    rows = {row["algorithm"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["random"]["runs"] == 2 and rows["iql"]["runs"] == 1
    for row in rows.values():
        assert row["env_steps"] == 256 and row["capture_n"] > 0 and 0.0 <= row["capture_mean"] <= 1.0
        assert row["steps_per_s"] > 0
    assert main(["compare", str(runs / "default" / "*"), "--metric", "capture", "--source", "final"]) == 0
    assert "| random on predator-prey | 0,1 |" in capsys.readouterr().out

    out = tmp_path / "capture.png"
    assert main(["plot", str(runs), "-o", str(out), "--metric", "capture", "--x", "wall", "--smooth", "3"]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG" and out.stat().st_size > 10_000

    # a second run of the same command trains nothing
    assert main(["experiment", str(path), "--dry-run"]) == 0
    assert capsys.readouterr().out.count(" done ") == 3

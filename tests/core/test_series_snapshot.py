"""scripts/series_snapshot.py: the copy of a run a repository carries loads to the same state as the run's
own checkpoint, is smaller where its arrays compress (a replay of frames), and never trips the loader's
zip-bomb cap; restore puts the runs back without touching one already there."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import numpy as np

from rlf.storage import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("series_snapshot", ROOT / "scripts" / "series_snapshot.py")
series_snapshot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(series_snapshot)


def make_run(path: Path) -> dict:
    rng = np.random.default_rng(0)
    frames = np.zeros((500, 42, 42), np.uint8)  # a replay of frames: mostly flat, like Mario's sky
    frames[:, 20:30, 5:15] = rng.integers(0, 255, (500, 10, 10), dtype=np.uint8)
    state = {"config": {"run": {"algorithm": "dqn"}}, "counters": {"env_steps": 40960},
             "replay": {"frames": frames, "dones": np.zeros(100_000, np.bool_)},  # compresses ~1000x: kept stored
             "weights": rng.standard_normal((64, 64)).astype(np.float32), "rng": (1, 2.5, "x")}
    path.mkdir(parents=True)
    ckpt.save(path / "checkpoint.rlf", state)
    (path / "run.json").write_text(json.dumps({"format": "rlf-run"}))
    (path / "episodes.csv").write_text("env_step,x_pos_max\n100,300\n")
    (path / "events.out.tfevents.1").write_text("not carried")
    return state


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a == b


def test_the_snapshot_loads_to_the_same_state_and_is_smaller(tmp_path):
    state = make_run(tmp_path / "runs" / "game" / "dqn-seed0")
    assert series_snapshot.main(["save", "--runs", str(tmp_path / "runs"), "--to", str(tmp_path / "snap")]) == 0
    copy = tmp_path / "snap" / "game" / "dqn-seed0"
    assert sorted(p.name for p in copy.iterdir()) == ["checkpoint.rlf", "episodes.csv", "run.json"]
    assert same(ckpt.load(copy / "checkpoint.rlf"), state)
    original = (tmp_path / "runs" / "game" / "dqn-seed0" / "checkpoint.rlf").stat().st_size
    assert (copy / "checkpoint.rlf").stat().st_size < original / 3
    with zipfile.ZipFile(copy / "checkpoint.rlf") as archive:
        kinds = {info.file_size: info.compress_type for info in archive.infolist()}
    assert kinds[frames_bytes(state)] == zipfile.ZIP_DEFLATED
    # the flags would deflate past the loader's cap of 50x: stored, or the copy would not load
    assert kinds[state["replay"]["dones"].nbytes + 128] == zipfile.ZIP_STORED


def frames_bytes(state: dict) -> int:
    return state["replay"]["frames"].nbytes + 128  # the .npy header rlf writes is 128 bytes


def test_restore_fills_a_fresh_runs_directory_and_leaves_a_present_run_alone(tmp_path, capsys):
    make_run(tmp_path / "runs" / "game" / "dqn-seed0")
    make_run(tmp_path / "runs" / "game" / "dqn-seed1")
    series_snapshot.main(["save", "--runs", str(tmp_path / "runs"), "--to", str(tmp_path / "snap")])
    fresh = tmp_path / "fresh"
    (fresh / "game" / "dqn-seed1").mkdir(parents=True)
    (fresh / "game" / "dqn-seed1" / "run.json").write_text("newer")
    assert series_snapshot.main(["restore", "--runs", str(fresh), "--to", str(tmp_path / "snap")]) == 0
    assert "game/dqn-seed1: already in" in capsys.readouterr().out
    assert (fresh / "game" / "dqn-seed1" / "run.json").read_text() == "newer"
    restored = fresh / "game" / "dqn-seed0" / "checkpoint.rlf"
    assert restored.read_bytes() == (tmp_path / "snap" / "game" / "dqn-seed0" / "checkpoint.rlf").read_bytes()


def test_nothing_to_save_is_an_error_naming_the_directory(tmp_path, capsys):
    assert series_snapshot.main(["save", "--runs", str(tmp_path / "none"), "--to", str(tmp_path / "snap")]) == 2
    assert f"no runs (*/*/run.json) under {tmp_path / 'none'}" in capsys.readouterr().err


def test_a_second_save_rewrites_only_the_runs_that_moved_on(tmp_path, capsys):
    runs, snap = tmp_path / "runs", tmp_path / "snap"
    make_run(runs / "game" / "dqn-seed0")
    state = make_run(runs / "game" / "dqn-seed1")
    series_snapshot.main(["save", "--runs", str(runs), "--to", str(snap)])
    kept = snap / "game" / "dqn-seed0" / "checkpoint.rlf"
    before = kept.stat().st_mtime_ns
    state["counters"]["env_steps"] = 81920  # seed 1 trained on and checkpointed
    ckpt.save(runs / "game" / "dqn-seed1" / "checkpoint.rlf", state)
    capsys.readouterr()
    assert series_snapshot.main(["save", "--runs", str(runs), "--to", str(snap)]) == 0
    out = capsys.readouterr().out
    assert "game/dqn-seed0: unchanged" in out and "game/dqn-seed1: 1 file(s)" in out
    assert kept.stat().st_mtime_ns == before
    assert ckpt.load(snap / "game" / "dqn-seed1" / "checkpoint.rlf")["counters"]["env_steps"] == 81920


def test_a_finished_run_keeps_its_logs_and_its_checkpoint_leaves_the_snapshot_once_evaluated(tmp_path, capsys):
    runs, snap = tmp_path / "runs", tmp_path / "snap"
    make_run(runs / "game" / "dqn-seed0")
    make_run(runs / "game" / "dqn-seed1")
    series_snapshot.main(["save", "--runs", str(runs), "--to", str(snap)])
    assert (snap / "game" / "dqn-seed1" / "checkpoint.rlf").is_file()
    (runs / "game" / "dqn-seed1" / "experiment.json").write_text(json.dumps({"env_steps": 1, "finished_at": 2.0}))
    # trained but not evaluated yet: rlf experiment evaluates the final agent later, from this checkpoint
    assert series_snapshot.main(["save", "--runs", str(runs), "--to", str(snap)]) == 0
    assert (snap / "game" / "dqn-seed1" / "checkpoint.rlf").is_file()
    (runs / "game" / "dqn-seed1" / "final_eval_stochastic.csv").write_text("return\n1.0\n")
    assert series_snapshot.main(["save", "--runs", str(runs), "--to", str(snap)]) == 0
    assert sorted(p.name for p in (snap / "game" / "dqn-seed1").iterdir()) == [
        "episodes.csv", "experiment.json", "final_eval_stochastic.csv", "run.json"]
    assert (snap / "game" / "dqn-seed0" / "checkpoint.rlf").is_file()  # still under way: a resume needs it
    fresh = tmp_path / "fresh"
    assert series_snapshot.main(["restore", "--runs", str(fresh), "--to", str(snap)]) == 0
    assert (fresh / "game" / "dqn-seed1" / "episodes.csv").read_text() == "env_step,x_pos_max\n100,300\n"
    assert not (fresh / "game" / "dqn-seed1" / "checkpoint.rlf").exists()

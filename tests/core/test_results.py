"""rlf compare and its statistics, on synthetic run directories with known numbers."""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from rlf.cli.commands import main
from rlf.experiments.results import bootstrap_ci, compare, find_runs, format_table, group_runs, iqm


def fake_run(path, algorithm="ppo", env="gym:CartPole-v1", seed=0, values=(), metric="return",
             log=((1000, 100.0), (2000, 50.0)), env_config=None, algo_config=None):
    """A run directory as `rlf train` writes it: run.json, episodes.csv (one row per value, env steps
    spread over the run) and metrics.csv (env_step and steps/s of each logging window)."""
    path.mkdir(parents=True)
    config = {"run": {"algorithm": algorithm, "env": env, "seed": seed, "steps": log[-1][0], "run_dir": str(path)},
              "algo": algo_config or {"lr": 0.001}, "env": env_config or {}}
    (path / "run.json").write_text(json.dumps({"format": "rlf-run", "config": config}))
    last_step = log[-1][0]
    with open(path / "episodes.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_step", metric, "length"])
        for i, value in enumerate(values):
            writer.writerow([int((i + 1) * last_step / len(values)), value, 10])
    with open(path / "metrics.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_step", "steps_per_second", "loss"])
        for step, rate in log:
            writer.writerow([step, rate, 0.5])
    return path


def test_iqm_drops_a_quarter_at_each_end():
    assert iqm(np.arange(1, 9)) == pytest.approx(4.5)        # 3..6
    assert iqm([0, 0, 0, 100]) == pytest.approx(0.0)         # the outlier is cut
    assert iqm([1.0, 3.0]) == pytest.approx(2.0)             # too few to cut anything


def test_bootstrap_interval_brackets_the_estimate_and_is_reproducible():
    rng = np.random.default_rng(1)
    runs = [rng.normal(10.0, 2.0, 400), rng.normal(10.5, 2.0, 400), rng.normal(9.5, 2.0, 400)]
    ci = bootstrap_ci(runs, reps=1000, seed=3)
    pooled = np.concatenate(runs)
    for stat, estimate in (("mean", pooled.mean()), ("iqm", iqm(pooled))):
        low, high = ci[stat]
        assert low < estimate < high
        assert high - low < 2.5  # seed means differ by +-0.5: the interval must not be absurdly wide
    assert bootstrap_ci(runs, reps=1000, seed=3) == ci
    # seed-to-seed variation widens the interval: the same episodes split into far-apart seeds
    apart = [runs[0] - 5, runs[1], runs[2] + 5]
    assert np.diff(bootstrap_ci(apart, reps=1000)["mean"]) > 3 * np.diff(ci["mean"])
    assert bootstrap_ci([np.full(50, 7.0)], reps=200) == {"mean": (7.0, 7.0), "iqm": (7.0, 7.0)}


def test_compare_groups_by_algorithm_and_reports_statistics(tmp_path):
    for seed, values in enumerate([[1, 2, 3, 4], [5, 6, 7, 8]]):
        fake_run(tmp_path / f"ppo-{seed}", "ppo", seed=seed, values=values)
    fake_run(tmp_path / "dqn-0", "dqn", values=[0, 0, 0, 100])
    rows = {row["algorithm"]: row for row in compare(find_runs([tmp_path / "*"]), ["return"], last=100)}
    assert set(rows) == {"ppo", "dqn"}
    ppo = rows["ppo"]
    # over runs (the default): each run's score is the mean of its final episodes (2.5 and 6.5)
    assert ppo["runs"] == 2 and ppo["seeds"] == "0,1" and ppo["return_n"] == 2 and ppo["level"] == "run"
    for stat in ("mean", "median", "iqm"):
        assert ppo[f"return_{stat}"] == pytest.approx(4.5)
        assert ppo[f"return_{stat}_ci"] == pytest.approx([2.5, 6.5])  # two runs: from one to the other
    assert rows["dqn"]["return_n"] == 1 and rows["dqn"]["return_iqm"] == pytest.approx(25.0)
    assert rows["dqn"]["return_mean_ci"] == pytest.approx([25.0, 25.0])
    # over episodes (labelled as such): every final episode pooled
    episodes = {row["algorithm"]: row for row in compare(find_runs([tmp_path]), ["return"], level="episode")}
    assert episodes["ppo"]["return_n"] == 8 and episodes["ppo"]["level"] == "episode"
    assert episodes["ppo"]["return_mean_ci"][0] <= 4.5 <= episodes["ppo"]["return_mean_ci"][1]
    assert episodes["dqn"]["return_iqm"] == pytest.approx(0.0) and episodes["dqn"]["return_mean"] == pytest.approx(25.0)
    # windows of 1000 steps at 100/s and 50/s: 10 s + 20 s
    assert ppo["env_steps"] == 2000 and ppo["wall_s"] == pytest.approx(30.0)
    assert ppo["steps_per_s"] == pytest.approx(2000 / 30)
    # --last takes each run's final episodes
    last2 = {r["algorithm"]: r for r in compare(find_runs([tmp_path]), ["return"], last=2)}
    assert last2["ppo"]["return_mean"] == pytest.approx(np.mean([3, 4, 7, 8]))


def test_a_threshold_metric_is_the_rate_of_episodes_past_it(tmp_path, capsys):
    fake_run(tmp_path / "a", "ppo", values=[500, 1500, 2500, 3000], metric="x_pos_max")
    fake_run(tmp_path / "b", "ppo", seed=1, values=[100, 200, 2100, 900], metric="x_pos_max")
    [row] = compare(find_runs([tmp_path]), ["x_pos_max>2000", "x_pos_max <= 200"])
    assert row["x_pos_max>2000_mean"] == pytest.approx(np.mean([2 / 4, 1 / 4]))
    assert row["x_pos_max <= 200_mean"] == pytest.approx(np.mean([0.0, 2 / 4]))
    assert main(["compare", str(tmp_path), "--metric", "x_pos_max>=3000", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["x_pos_max>=3000_mean"] == pytest.approx(0.125)
    with pytest.raises(Exception, match="metric 'speed>1' is not logged"):
        compare(find_runs([tmp_path]), ["speed>1"])


def test_groups_keep_settings_apart_and_name_the_difference(tmp_path):
    fake_run(tmp_path / "dense", "ppo", env="mario", values=[1], env_config={"extrinsic_reward": "game"})
    fake_run(tmp_path / "sparse", "ppo", env="mario", values=[2], env_config={"extrinsic_reward": "flag"})
    fake_run(tmp_path / "sparse-1", "ppo", env="mario", seed=1, values=[3], env_config={"extrinsic_reward": "flag"})
    groups = group_runs(find_runs([tmp_path]))
    labels = sorted(g.label for g in groups)
    assert labels == ["ppo on mario [env.extrinsic_reward=flag]", "ppo on mario [env.extrinsic_reward=game]"]
    assert sorted(len(g.runs) for g in groups) == [1, 2]


def test_compare_formats(tmp_path, capsys):
    fake_run(tmp_path / "a", "ppo", values=[1, 2, 3], metric="capture")
    fake_run(tmp_path / "b", "random", values=[0, 0, 1], metric="capture")
    assert main(["compare", str(tmp_path / "*"), "--metric", "capture"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| group | seeds | capture mean [95% CI over runs] | capture median [95% CI over "
                               "runs] | capture IQM [95% CI over runs] | runs |")
    assert any(line.startswith("| ppo on gym:CartPole-v1 | 0 | 2 [") for line in table[:4])
    # two groups: the second's probability of improvement over the first (one run each: 2 > 1/3)
    # with the one-sided permutation p of "above" (1 run against 1: two relabellings, so 0.5 at best)
    assert any(line.startswith("| random on gym:CartPole-v1 | capture | 0.00 [0.00, 0.00] | 1 | 1 | 1 vs 1 |")
               or line.startswith("| ppo on gym:CartPole-v1 | capture | 1.00 [1.00, 1.00] | 0.5 | 0.5 | 1 vs 1 |")
               for line in table)
    assert main(["compare", str(tmp_path / "*"), "--metric", "capture", "--level", "episode"]) == 0
    assert capsys.readouterr().out.startswith("| group | seeds | capture mean [95% CI over episodes] | capture IQM "
                                              "[95% CI over episodes] | episodes |")
    assert main(["compare", str(tmp_path), "--metric", "capture", "--format", "csv"]) == 0
    rows = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert {r["algorithm"] for r in rows} == {"ppo", "random"}
    assert float(rows[0]["capture_mean_ci_low"]) <= float(rows[0]["capture_mean"])
    assert main(["compare", str(tmp_path), "--metric", "capture,length", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {row["length_mean"] for row in data} == {10.0}
    assert main(["compare", str(tmp_path), "--metric", "capture", "--format", "json", "--baseline", "random"]) == 0
    [ppo] = [row for row in json.loads(capsys.readouterr().out) if row["algorithm"] == "ppo"]
    assert ppo["capture_improvement"]["probability"] == 1.0
    assert ppo["capture_improvement"]["baseline"] == "random on gym:CartPole-v1"


@pytest.mark.parametrize("args, message", [
    (["compare", "{tmp}/nothing-*"], "no files match"),
    (["compare", "{tmp}/missing"], "does not exist"),
    (["compare", "{tmp}/foreign"], "is not an rlf run directory"),
    (["compare", "{tmp}/run", "--metric", "x_pos_max"], "metric 'x_pos_max' is not logged by run"),
    (["compare", "{tmp}/run", "--source", "eval"], "has no eval.csv"),
    (["compare", "{tmp}/run", "--last", "0"], "--last must be between 1 and"),
    (["compare", "{tmp}/run", "--last", "some"], "--last is a whole number or all"),
    (["compare", "{tmp}/run", "--score", "max"], "argument --score: invalid choice"),
    (["compare", "{tmp}/broken"], "is not an rlf run file"),
    (["compare", "{tmp}/run", "{tmp}/other", "--baseline", "sac"], "--baseline 'sac' names 0 of the groups"),
    (["compare", "{tmp}/run.lock", "{tmp}/foreign/notes.txt"], "no rlf run directories among"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    fake_run(tmp_path / "run", values=[1, 2])
    fake_run(tmp_path / "other", "dqn", values=[1, 2])
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("hello")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "run.json").write_text("{not json")
    (tmp_path / "run.lock").write_text("")
    try:
        code = main([a.format(tmp=tmp_path) for a in args])
    except SystemExit as exc:  # argparse's own refusals (a bounded number) exit instead of returning
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_files_beside_the_runs_from_a_shell_glob_are_passed_over(tmp_path, capsys):
    # `rlf compare runs/*` unquoted: the shell also hands over rlf experiment's lock files and tables
    fake_run(tmp_path / "a", values=[1, 2])
    fake_run(tmp_path / "b", values=[3, 4])
    for name in ("a.lock", "b.lock", "compare.md"):
        (tmp_path / name).write_text("")
    assert main(["compare", *(str(p) for p in sorted(tmp_path.iterdir())), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["runs"] == 2


def test_metric_error_lists_what_the_run_logs(tmp_path, capsys):
    fake_run(tmp_path / "run", values=[1, 2], metric="capture")
    assert main(["compare", str(tmp_path / "run"), "--metric", "return"]) == 2
    assert "capture, length" in capsys.readouterr().err


def test_compare_and_the_plot_hint_work_without_matplotlib(tmp_path):
    fake_run(tmp_path / "run", values=[1, 2, 3])
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # import matplotlib now raises ImportError
            "from rlf.cli.commands import main\n"
            f"assert main(['compare', {str(tmp_path)!r}]) == 0\n"
            "assert 'matplotlib' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            f"sys.exit(main(['plot', {str(tmp_path)!r}, '-o', {str(tmp_path / 'x.png')!r}]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "| gym:CartPole-v1" not in done.stdout and "ppo on gym:CartPole-v1" in done.stdout
    assert done.stderr.strip() == "rlf: error: plotting needs matplotlib: pip install 'rlf[plot]'"
    assert not (tmp_path / "x.png").exists()


def test_markdown_marks_groups_without_episodes(tmp_path):
    fake_run(tmp_path / "fresh", values=[])
    rows = compare(find_runs([tmp_path]), ["return"])
    assert rows[0]["return_n"] == 0
    assert "| – [–, –] |" in format_table(rows, ["return"])
    data = json.loads(format_table(rows, ["return"], "json"), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert data[0]["return_mean"] is None and data[0]["return_iqm_ci"] == [None, None]


# -- rlf plot (matplotlib is in the core's test extra) ----------------------------------------------

def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_draws_a_line_and_a_band_per_group(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for seed in range(3):
        fake_run(tmp_path / f"ppo-{seed}", "ppo", seed=seed, values=np.linspace(0, 100, 60) + 20 * seed + rng.normal(0, 5, 60))
    fake_run(tmp_path / "random-0", "random", values=rng.normal(10, 2, 60))
    out = tmp_path / "plots" / "curves.png"
    assert main(["plot", str(tmp_path / "*-*"), "-o", str(out), "--smooth", "5"]) == 0
    assert "wrote" in capsys.readouterr().err
    width, height = _png_size(out)
    assert (width, height) == (880, 528) and out.stat().st_size > 20_000
    import matplotlib.image

    pixels = (matplotlib.image.imread(out)[..., :3] * 255).round().astype(int)

    def share(rgb):  # fraction of pixels of exactly this colour
        return float(np.all(pixels == rgb, axis=-1).mean())

    assert share((31, 119, 180)) > 0.001    # C0 (the first group's line) was drawn
    assert share((255, 127, 14)) > 0.001    # C1
    band = np.all(np.abs(pixels - (210, 228, 240)) <= 4, axis=-1).mean()  # C0 at alpha 0.2 over white
    assert band > 0.02                       # three seeds 20 apart: a wide shaded band


def test_plot_profile_draws_the_fraction_of_runs_above_each_score(tmp_path, capsys):
    from rlf.experiments.plotting import plot_profile

    for seed, level in enumerate([10.0, 20.0, 30.0]):
        fake_run(tmp_path / f"ppo-{seed}", "ppo", seed=seed, values=[level] * 5)
    fake_run(tmp_path / "random-0", "random", values=[5.0] * 5)
    drawn = plot_profile(find_runs([tmp_path]), tmp_path / "profile.svg", reps=100)
    assert drawn == {"ppo on gym:CartPole-v1": 3, "random on gym:CartPole-v1": 1}
    assert "fraction of runs" in (tmp_path / "profile.svg").read_text()
    assert main(["plot", str(tmp_path), "--profile", "-o", str(tmp_path / "profile.png")]) == 0
    assert "2 profile(s)" in capsys.readouterr().err and _png_size(tmp_path / "profile.png")[0] > 0


def test_plot_runs_reports_points_and_wall_axis(tmp_path):
    from rlf.experiments.plotting import plot_runs, smooth_series

    assert smooth_series(np.array([0.0, 2.0, 4.0, 6.0]), 2).tolist() == [0.0, 1.0, 3.0, 5.0]
    for seed in range(2):
        fake_run(tmp_path / f"ppo-{seed}", "ppo", seed=seed, values=np.arange(40.0))
    runs = find_runs([tmp_path])
    assert plot_runs(runs, tmp_path / "steps.png", smooth=1) == {"ppo on gym:CartPole-v1": 200}
    assert plot_runs(runs, tmp_path / "wall.svg", x="wall")
    assert "wall time (s)" in (tmp_path / "wall.svg").read_text()


def test_plot_bad_input(tmp_path, capsys):
    fake_run(tmp_path / "run", values=[1, 2], metric="capture")
    assert main(["plot", str(tmp_path / "run"), "-o", str(tmp_path / "a.png"), "--metric", "return"]) == 2
    assert "metric 'return' is not logged" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:  # argparse refuses it, as one line
        main(["plot", str(tmp_path / "run"), "-o", str(tmp_path / "a.png"), "--smooth", "0"])
    assert exited.value.code == 2 and "--smooth must be between 1" in capsys.readouterr().err
    fake_run(tmp_path / "empty", values=[])
    assert main(["plot", str(tmp_path / "empty"), "-o", str(tmp_path / "a.png")]) == 2
    assert "nothing to plot" in capsys.readouterr().err
    assert not (tmp_path / "a.png").exists()


def test_eval_csv_is_read_when_present(tmp_path, capsys):
    run = fake_run(tmp_path / "run", values=[1, 2])
    with open(run / "eval.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["env_step", "eval/return", "eval/length"])
        for step, value in ((500, 10.0), (1000, 20.0), (1500, 30.0), (2000, 50.0)):
            writer.writerow([step, value, 5])
    rows = compare(find_runs([run]), ["return"], source="eval", last=2)
    assert rows[0]["return_mean"] == pytest.approx(40.0) and rows[0]["return_n"] == 1  # one run
    assert main(["plot", str(run), "-o", str(tmp_path / "eval.png"), "--source", "eval", "--smooth", "1"]) == 0


def test_evaluation_sources_leave_out_runs_without_them(tmp_path, capsys):
    evaluated = fake_run(tmp_path / "a", "ppo", values=[1, 2])
    fake_run(tmp_path / "b", "ppo", seed=1, values=[3, 4])
    (evaluated / "final_eval.csv").write_text("episode,return\n1,7\n2,9\n")
    assert main(["compare", str(tmp_path), "--source", "final", "--format", "json"]) == 0
    captured = capsys.readouterr()
    row = json.loads(captured.out)[0]
    assert row["runs"] == 1 and row["return_mean"] == pytest.approx(8.0)
    assert captured.err.startswith("rlf: left out 1 run(s) without final_eval.csv:") and str(tmp_path / "b") in captured.err


def test_env_steps_count_episodes_logged_after_the_last_metrics_row(tmp_path):
    run = fake_run(tmp_path / "run", values=[1, 2])
    with open(run / "episodes.csv", "a") as handle:
        handle.write("2500,3,10\n")
    row = compare(find_runs([run]), ["return"])[0]
    assert row["env_steps"] == 2500 and row["wall_s"] == pytest.approx(30.0)


def test_a_run_s_score_can_be_its_total_and_improvements_carry_a_permutation_test(tmp_path, capsys):
    # flags per run over every episode: 3, 4, 5 (arm) against 0, 1, 1 (baseline)
    for seed, flags in enumerate([[1, 1, 1, 0], [1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]):
        fake_run(tmp_path / f"icm-{seed}", "icm", env="mario", seed=seed, values=flags, metric="flag")
    for seed, flags in enumerate([[0, 0, 0, 0], [0, 1, 0], [1, 0, 0, 0, 0, 0]]):
        fake_run(tmp_path / f"ppo-{seed}", "ppo", env="mario", seed=seed, values=flags, metric="flag")
    runs = find_runs([tmp_path])
    rows = {r["algorithm"]: r for r in compare(runs, ["flag"], last=10**9, score="sum")}
    assert rows["icm"]["flag_mean"] == pytest.approx(4.0) and rows["ppo"]["flag_mean"] == pytest.approx(2 / 3)
    assert rows["icm"]["flag_n"] == 3
    means = {r["algorithm"]: r for r in compare(runs, ["flag"], last=10**9)}
    assert means["icm"]["flag_mean"] == pytest.approx(np.mean([3 / 4, 4 / 6, 1.0]))
    assert main(["compare", str(tmp_path), "--metric", "flag", "--last", "all", "--score", "sum",
                 "--baseline", "ppo"]) == 0
    out = capsys.readouterr().out
    assert "flag per run (sum) mean [95% CI over runs]" in out
    # every icm run above every ppo run: P = 1, and the exact one-sided p is 1 / C(6, 3) = 0.05
    assert "| 1.00 [1.00, 1.00] | 0.05 | 0.05 | 3 vs 3 |" in out
    assert main(["compare", str(tmp_path), "--metric", "flag", "--score", "sum", "--level", "episode"]) == 2
    assert "--score sum is a run's total; it needs --level run" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse's own refusal
        main(["compare", str(tmp_path), "--metric", "flag", "--last", "most"])
    assert "--last is a whole number or all, got 'most'" in capsys.readouterr().err


def test_the_learner_s_metrics_compare_and_plot_per_log_interval(tmp_path, capsys):
    fake_run(tmp_path / "a", "rnd", env="mario", values=[1, 2], log=((1000, 100.0), (2000, 50.0), (3000, 50.0)))
    [row] = compare(find_runs([tmp_path]), ["loss"], source="learner", last=2)
    assert row["loss_mean"] == pytest.approx(0.5) and row["loss_n"] == 1  # metrics.csv's column, one run
    with pytest.raises(Exception, match="metric 'intrinsic_reward_mean' is not logged"):
        compare(find_runs([tmp_path]), ["intrinsic_reward_mean"], source="learner")
    assert main(["plot", str(tmp_path), "--source", "learner", "--metric", "loss", "--smooth", "1",
                 "-o", str(tmp_path / "loss.png")]) == 0
    assert (tmp_path / "loss.png").stat().st_size > 0

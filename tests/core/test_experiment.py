"""rlf experiment end to end, tiny: two test algorithms on the test plugin's two-agent line env (whose
episode metric `reached` plays the part of Mario's x_pos_max or predator-prey's capture)."""

import csv
import json
import time

import pytest

from rlf.cli.commands import main
from rlf.errors import ConfigError
from rlf.experiments.results import compare, find_runs
from rlf.experiments.runner import run_experiment
from rlf.experiments.spec import load_experiment

EXPERIMENT = """
[experiment]
env = "line"
steps = 400
seeds = [0]
runs_dir = "{runs}"
metrics = ["reached", "return/walker"]
last = 20
eval_episodes = 3
plot_metric = "reached"
smooth = 5

[run]
num_envs = 2
log_interval = 100
checkpoint_interval = 100

[env]
length = 4

[settings.short]
[settings.long.env]
length = 8

[algorithms.linear-pg]
seeds = [0, 1]
[algorithms.linear-pg.algo]
lr = 0.1
rollout_steps = 8

[algorithms.tabular-q]
settings = ["short"]
"""


@pytest.fixture
def experiment_file(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text(EXPERIMENT.format(runs=tmp_path / "runs"))
    return path


def test_plan_layers_settings_last_and_filters(experiment_file):
    experiment = load_experiment(experiment_file)
    assert [r.name for r in experiment.runs] == ["short/linear-pg-seed0", "short/linear-pg-seed1",
                                                 "short/tabular-q-seed0", "long/linear-pg-seed0",
                                                 "long/linear-pg-seed1"]
    long = experiment.runs[3]
    assert long.config["env"]["length"] == 8 and long.config["algo"]["lr"] == 0.1
    assert long.config["run"]["steps"] == 400 and long.config["run"]["num_envs"] == 2
    subset = load_experiment(experiment_file, only=["short/*-seed3"], steps=50, seeds=[3],
                             overrides=["env.length=5"])
    assert [r.name for r in subset.runs] == ["short/linear-pg-seed3", "short/tabular-q-seed3"]
    assert subset.runs[0].config["run"]["steps"] == 50 and subset.runs[0].config["env"]["length"] == 5


def test_per_algorithm_budgets(experiment_file):
    text = experiment_file.read_text()
    text = text.replace("[algorithms.linear-pg.algo]", "[algorithms.linear-pg.steps]\nlong = 900\n"
                                                       "[algorithms.linear-pg.algo]")
    text = text.replace('settings = ["short"]', 'settings = ["short"]\nsteps = 700')
    experiment_file.write_text(text)
    budgets = {run.name: run.steps for run in load_experiment(experiment_file).runs}
    assert budgets == {"short/linear-pg-seed0": 400, "short/linear-pg-seed1": 400, "short/tabular-q-seed0": 700,
                       "long/linear-pg-seed0": 900, "long/linear-pg-seed1": 900}
    assert all(run.config["run"]["steps"] == run.steps for run in load_experiment(experiment_file).runs)
    # --steps is a trial of the whole file: it overrides every budget the file sets
    assert {run.steps for run in load_experiment(experiment_file, steps=50).runs} == {50}


@pytest.mark.parametrize("text, message", [
    ("[experiment]\nenv='line'\nsteps='abc'\n[algorithms.x]\n", "steps = 'abc': the budget must be a whole"),
    ("[experiment]\nenv='line'\nsteps=true\n[algorithms.x]\n", "steps = True: the budget"),
    ("[experiment]\nenv='line'\n[algorithms.x]\nsteps=64.5\n", "[algorithms.x] steps = 64.5"),
    ("[experiment]\nenv='line'\n[algorithms.x]\nsteps={default=0}\n", "[algorithms.x] steps.default = 0"),
    ("[experiment]\nenv='line'\n", "no [algorithms.<name>] tables"),
    ("[experiment]\nsteps=5\n[algorithms.x]\n", 'needs env = "..."'),
    ("[experiment]\nenv='line'\nbudget=5\n[algorithms.x]\n", "unknown key(s) ['budget']"),
    ("[experiment]\nenv='line'\n[algorithms.x]\nsettings=['nope']\n", "unknown setting(s) ['nope']"),
    ("[experiment\n", "is not valid TOML"),
])
def test_bad_experiment_files(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        load_experiment(path)


def test_cli_errors_are_one_line(tmp_path, experiment_file, capsys):
    assert main(["experiment", str(tmp_path / "missing.toml")]) == 2
    assert main(["experiment", str(experiment_file), "--only", "nothing/*"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "does not exist" in err[0] and "matches none" in err[1]


def test_runs_resumes_skips_and_reports(registry, experiment_file, tmp_path):
    log: list[str] = []
    experiment = load_experiment(experiment_file, only=["short/*"])
    outcomes = run_experiment(experiment, log=log.append, registry=registry)
    assert outcomes == {"short/linear-pg-seed0": "trained", "short/linear-pg-seed1": "trained",
                        "short/tabular-q-seed0": "trained"}
    runs_dir = tmp_path / "runs"
    for run in experiment.runs:
        assert json.loads((run.path / "experiment.json").read_text())["env_steps"] == 400
        with open(run.path / "final_eval.csv") as handle:
            assert len(list(csv.DictReader(handle))) == 3
    table = (runs_dir / "compare.md").read_text()
    assert "linear-pg on line" in table and "tabular-q on line" in table and "Greedy evaluation" in table
    assert (runs_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"

    # a second call finds everything done
    log.clear()
    assert set(run_experiment(experiment, log=log.append, registry=registry).values()) == {"done"}
    assert not any("training" in line for line in log)

    # a bigger budget resumes each run from its checkpoint
    bigger = load_experiment(experiment_file, only=["short/linear-pg-seed0"], steps=600)
    assert run_experiment(bigger, log=log.append, registry=registry, report=False) == {
        "short/linear-pg-seed0": "resumed"}
    assert any("resuming at env step 400 of 600" in line for line in log)
    assert json.loads((bigger.runs[0].path / "experiment.json").read_text())["env_steps"] == 600
    # ... and evaluates the new final checkpoint instead of keeping the 400-step evaluation
    assert any(line.startswith("short/linear-pg-seed0: 3 greedy evaluation episodes") for line in log)
    log.clear()
    assert run_experiment(bigger, log=log.append, registry=registry, report=False) == {
        "short/linear-pg-seed0": "done"}
    assert not any("evaluation episodes" in line for line in log)

    # a run killed before its first checkpoint starts over; the old directory is kept aside
    broken = load_experiment(experiment_file, only=["long/linear-pg-seed0"])
    broken.runs[0].path.mkdir(parents=True)
    (broken.runs[0].path / "run.json").write_text('{"format": "rlf-run"}')   # written first, by rlf
    (broken.runs[0].path / "episodes.csv").write_text("env_step,return\n1,0\n")
    run_experiment(broken, log=log.append, registry=registry, report=False)
    aside = list(broken.runs[0].path.parent.glob(".linear-pg-seed0.incomplete-*"))
    assert len(aside) == 1 and (aside[0] / "episodes.csv").read_text() == "env_step,return\n1,0\n"
    rows = compare(find_runs([broken.runs[0].path]), ["reached"])
    assert rows[0]["env_steps"] == 400 and rows[0]["group"] == "linear-pg on line"
    # the directory moved aside is not another seed of the group
    (aside[0] / "run.json").write_text((broken.runs[0].path / "run.json").read_text())
    long_runs = [g for g in compare(find_runs([tmp_path / "runs" / "long"]), ["reached"])]
    assert [g["runs"] for g in long_runs] == [1]


def test_a_variant_table_trains_the_algorithm_it_names_under_its_own_run_names(registry, experiment_file, tmp_path):
    text = experiment_file.read_text() + '[algorithms.pg-fast]\nalgorithm = "linear-pg"\nsettings = ["short"]\n' \
        "steps = 300\n[algorithms.pg-fast.algo]\nlr = 0.5\nrollout_steps = 8\n"
    experiment_file.write_text(text)
    experiment = load_experiment(experiment_file, only=["short/linear-pg-seed0", "short/pg-fast-*"])
    assert [(r.name, r.entry, r.algorithm, r.steps, r.config["algo"]["lr"]) for r in experiment.runs] == [
        ("short/linear-pg-seed0", "linear-pg", "linear-pg", 400, 0.1),
        ("short/pg-fast-seed0", "pg-fast", "linear-pg", 300, 0.5)]
    assert run_experiment(experiment, log=lambda line: None, registry=registry) == {
        "short/linear-pg-seed0": "trained", "short/pg-fast-seed0": "trained"}
    assert "Budget linear-pg 400, pg-fast 300 env steps per run" in (tmp_path / "runs" / "compare.md").read_text()
    saved = json.loads((tmp_path / "runs" / "short" / "pg-fast-seed0" / "run.json").read_text())
    assert saved["config"]["run"]["algorithm"] == "linear-pg"
    # the two are one algorithm with different settings: two groups, each named by its difference
    labels = sorted(g["group"] for g in compare(find_runs([tmp_path / "runs" / "short"]), ["reached"]))
    assert len(labels) == 2 and all(label.startswith("linear-pg on line [") for label in labels)
    assert any("lr=0.5" in label for label in labels), labels


def test_a_variant_of_an_unknown_algorithm_is_refused_before_anything_trains(registry, experiment_file):
    experiment_file.write_text(experiment_file.read_text() + '[algorithms.v]\nalgorithm = "no-such-algo"\n')
    experiment = load_experiment(experiment_file)
    with pytest.raises(ConfigError, match="no-such-algo"):
        run_experiment(experiment, log=lambda line: None, registry=registry)
    assert not (experiment.runs_dir / "short").exists()


def test_a_locked_run_is_left_to_its_owner(registry, experiment_file):
    from filelock import FileLock

    experiment = load_experiment(experiment_file, only=["short/tabular-q-seed0"])
    experiment.runs[0].path.parent.mkdir(parents=True)
    with FileLock(str(experiment.runs[0].path) + ".lock"):
        log: list[str] = []
        assert run_experiment(experiment, log=log.append, registry=registry, report=False) == {
            "short/tabular-q-seed0": "busy"}
    assert not experiment.runs[0].path.exists()


def test_stochastic_evaluation_acts_as_in_training_and_gets_its_own_table(registry, experiment_file, tmp_path):
    # tabular-q explores with epsilon 1 for good: greedily it walks straight to the goal it learned,
    # acting as in training it is a random walk, so the two evaluations must differ in episode length
    text = experiment_file.read_text().replace("eval_episodes = 3", 'eval_episodes = 20\neval_modes = ["greedy", "stochastic"]')
    text += '[algorithms.tabular-q.algo]\nexploration = {schedule = "per_step", start = 1.0, end = 1.0, decay_steps = 1}\n'
    experiment_file.write_text(text)
    experiment = load_experiment(experiment_file, only=["short/tabular-q-*"], steps=2000)
    assert experiment.eval_modes == ["greedy", "stochastic"]
    run_experiment(experiment, log=lambda line: None, registry=registry)
    path = experiment.runs[0].path

    def lengths(name):
        with open(path / name) as handle:
            return [float(row["length"]) for row in csv.DictReader(handle)]

    greedy, stochastic = lengths("final_eval.csv"), lengths("final_eval_stochastic.csv")
    assert len(greedy) == len(stochastic) == 20
    assert sum(stochastic) / 20 > 1.5 * sum(greedy) / 20
    table = (tmp_path / "runs" / "compare.md").read_text()
    assert "Greedy evaluation" in table and "Stochastic evaluation" in table
    rows = compare(find_runs([path]), ["reached"], source="final-stochastic", last=10**9)
    assert rows[0]["runs"] == 1


def test_eval_modes_are_validated(experiment_file):
    experiment_file.write_text(experiment_file.read_text().replace("eval_episodes = 3",
                                                                   'eval_episodes = 3\neval_modes = ["sampled"]'))
    with pytest.raises(ConfigError, match="eval_modes = \\['sampled'\\]: give a non-empty list of 'greedy'"):
        load_experiment(experiment_file)


def test_fixed_start_evaluation_plays_one_greedy_episode_with_its_overrides(registry, experiment_file):
    # the overrides reach the evaluation's env (max_steps=2 truncates it) and not the training runs'
    text = experiment_file.read_text().replace(
        "eval_episodes = 3", 'eval_episodes = 3\neval_modes = ["greedy", "fixed-start"]\nfixed_start = ["env.max_steps=2"]')
    experiment_file.write_text(text)
    experiment = load_experiment(experiment_file, only=["short/tabular-q-*"], steps=200)
    run_experiment(experiment, log=[].append, registry=registry)
    path = experiment.runs[0].path
    with open(path / "final_eval_fixed_start.csv") as handle:
        fixed = list(csv.DictReader(handle))
    with open(path / "final_eval.csv") as handle:
        greedy = list(csv.DictReader(handle))
    assert len(fixed) == 1 and float(fixed[0]["length"]) <= 2
    assert len(greedy) == 3
    assert json.loads((path / "run.json").read_text())["config"]["env"]["max_steps"] == 20
    assert "Fixed-start evaluation after training (1 episode(s) per run)" in (
        experiment.runs_dir / "compare.md").read_text()


@pytest.mark.parametrize("head, message", [
    ('eval_modes = ["fixed-start"]', 'eval mode "fixed-start" needs the --set overrides'),
    ('fixed_start = "env.noop_max=0"', "fixed_start = 'env.noop_max=0': input should be a valid list"),
    ('fixed_start = ["noop_max"]', "fixed_start"),
])
def test_bad_fixed_start_settings(experiment_file, head, message):
    experiment_file.write_text(experiment_file.read_text().replace("eval_episodes = 3", f"eval_episodes = 3\n{head}"))
    with pytest.raises(ConfigError, match=message):
        load_experiment(experiment_file)


BASE = "[experiment]\nenv='line'\nruns_dir='{runs}'\n{head}\n[algorithms.tabular-q]\n{algo}\n"


@pytest.mark.parametrize("head, algo, rest, message", [
    ("seeds=3", "", "", "[experiment] seeds = 3: input should be a valid list"),
    ("seeds=[]", "", "", "seeds = []: list should have at least 1 item"),
    ("seeds=[-1]", "", "", "seeds = [-1]: input should be greater than or equal to 0"),
    ("steps=64.7", "", "", "steps = 64.7: the budget must be a whole number"),
    ("eval_episodes=-1", "", "", "eval_episodes = -1: input should be greater than or equal to 0"),
    ("last=true", "", "", "last = True: input should be a valid integer"),
    ("metrics=[]", "", "", "metrics = []: list should have at least 1 item"),
    ("metrics=[3]", "", "", "metrics = [3]: input should be a valid string"),
    ("smooth='x'", "", "", "smooth = 'x'"),
    ("description=5", "", "", "description = 5"),
    ("", "seeds='0'", "", "[algorithms.tabular-q] seeds = '0'"),
    ("", "config=3", "", "[algorithms.tabular-q] config = 3"),
    ("", "run=3", "", "[algorithms.tabular-q] run = 3: input should be a valid dictionary"),
    ("", "steps={'../x'=5}", "", "[algorithms.tabular-q] steps: '../x' is not usable as a directory name"),
    ("", "", "[settings.'../../x']\n", "[settings]: '../../x' is not usable as a directory name"),
    ("", "", "[settings.'/etc']\n", "'/etc' is not usable as a directory name"),
    ("", "", "[settings.'']\n", "'' is not usable as a directory name"),
    ("", "", "[settings.'.hidden']\n", "'.hidden' is not usable"),
    ("", "", "[algorithms.'..']\n", "[algorithms]: '..' is not usable as a directory name"),
    ("", "", "[algorithms.'a/b']\n", "'a/b' is not usable"),
    ("", "", "[bogus]\n", "unknown table(s) ['bogus']"),
    ("", "", "[settings.a]\nfoo=1\n", "[settings.a]: unknown key(s) ['foo']"),
])
def test_experiment_fields_are_typed_bounded_and_names_are_single_directories(tmp_path, head, algo, rest, message):
    path = tmp_path / "bad.toml"
    path.write_text(BASE.format(runs=tmp_path / "runs", head=head, algo=algo) + rest)
    with pytest.raises(ConfigError) as caught:
        load_experiment(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("runs_dir, message", [("''", "runs_dir = '': string should have at least 1 character"),
                                               ("5", "runs_dir = 5: input should be a valid string"),
                                               ("'  '", "runs_dir = '  ': must not be blank")])
def test_runs_dir_is_validated_like_run_dir(tmp_path, runs_dir, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "exp.toml"
    path.write_text(f"[experiment]\nenv='line'\nruns_dir={runs_dir}\n[algorithms.tabular-q]\n")
    assert main(["experiment", str(path), "--steps", "10"]) == 2
    assert main(["experiment", str(path.with_name("ok.toml")), "--runs-dir", ""]) == 2
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_experiment(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp.toml"]


def test_a_binary_or_unreadable_experiment_file_is_one_line(tmp_path, capsys):
    (tmp_path / "bin.toml").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    (tmp_path / "dir.toml").mkdir()
    assert main(["experiment", str(tmp_path / "bin.toml")]) == 2
    assert main(["experiment", str(tmp_path / "dir.toml")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "not UTF-8 text" in err[0] and "is a directory" in err[1]


@pytest.mark.parametrize("flag, value, message", [("--steps", "0", "--steps 0: the budget"),
                                                  ("--eval-episodes", "-1", "--eval-episodes -1"),
                                                  ("--seeds", "-3", "--seeds [-3]")])
def test_command_line_overrides_are_validated(experiment_file, capsys, flag, value, message):
    assert main(["experiment", str(experiment_file), flag, value]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.parametrize("change, message", [
    (("[algorithms.tabular-q]", "[algorithms.nope]"), "run short/nope-seed0: unknown algorithm 'nope'"),
    (('env = "line"', 'env = "no-such-env"'), "no-such-env"),
    (("length = 8", "length = -8"), "run long/linear-pg-seed0: invalid config: env.length"),
    (("length = 8", "lenght = 8"), "unknown key 'env.lenght'"),
])
def test_every_run_is_resolved_before_the_first_trains(registry, experiment_file, tmp_path, change, message):
    experiment_file.write_text(experiment_file.read_text().replace(*change))
    experiment = load_experiment(experiment_file)
    with pytest.raises(ConfigError) as caught:
        run_experiment(experiment, log=lambda line: None, registry=registry)
    assert message in str(caught.value) and "nothing was trained" in str(caught.value)
    assert not (tmp_path / "runs").exists()


def test_a_bad_set_is_found_before_anything_trains(registry, experiment_file, tmp_path):
    experiment = load_experiment(experiment_file, overrides=["algo.lr=-1"])
    with pytest.raises(ConfigError, match="run short/linear-pg-seed0: invalid config: algo.lr"):
        run_experiment(experiment, log=lambda line: None, registry=registry)
    assert not (tmp_path / "runs").exists()


def test_a_directory_rlf_did_not_create_is_never_moved_or_written(registry, experiment_file, tmp_path):
    experiment = load_experiment(experiment_file, only=["short/tabular-q-seed0"])
    mine = experiment.runs[0].path
    mine.mkdir(parents=True)
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(ConfigError, match="holds files rlf did not write; rlf never moves"):
        run_experiment(experiment, log=lambda line: None, registry=registry)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    assert not list(mine.parent.glob(".tabular-q-seed0.incomplete-*"))


def test_a_setting_directory_that_is_a_link_out_is_refused(registry, experiment_file, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "short").symlink_to(elsewhere, target_is_directory=True)
    experiment = load_experiment(experiment_file, only=["short/tabular-q-seed0"])
    with pytest.raises(ConfigError, match="is a symbolic link"):
        run_experiment(experiment, log=lambda line: None, registry=registry)
    assert not any(elsewhere.iterdir())


def test_until_ends_a_run_at_its_target_and_its_evaluation_is_the_check(registry, experiment_file, tmp_path):
    text = experiment_file.read_text().replace(
        'settings = ["short"]', 'settings = ["short"]\nuntil = {metric = "reached", value = 1, mode = "greedy", '
                                'every = 200, settings = ["short"]}')
    experiment_file.write_text(text)
    experiment = load_experiment(experiment_file, only=["short/tabular-q-seed0"], steps=20_000)
    log: list[str] = []
    assert run_experiment(experiment, log=log.append, registry=registry, report=False) == {
        "short/tabular-q-seed0": "trained"}
    path = experiment.runs[0].path
    record = json.loads((path / "experiment.json").read_text())
    assert record["until"]["metric"] == "reached" and record["until"]["value"] >= 1
    assert 0 < record["env_steps"] < 20_000 and record["env_steps"] % 200 == 0
    checks = [line for line in log if "greedy evaluation at env step" in line]
    assert checks[-1].endswith("reached, the run ends here") and all(c.endswith("not yet") for c in checks[:-1])
    with open(path / "final_eval.csv") as handle:   # the published evaluation is the check that stopped it
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3 and sum(float(r["reached"]) for r in rows) / 3 == record["until"]["value"]
    # a finished run stays finished, short of its budget
    assert run_experiment(experiment, log=log.append, registry=registry, report=False) == {
        "short/tabular-q-seed0": "done"}
    assert not any("resuming" in line for line in log)


def test_until_never_reached_trains_to_the_budget_checking_on_the_way(registry, experiment_file):
    text = experiment_file.read_text().replace(
        'settings = ["short"]', 'settings = ["short"]\nuntil = {metric = "reached", value = 2, every = 200}')
    experiment_file.write_text(text)
    experiment = load_experiment(experiment_file, only=["short/tabular-q-seed0"], steps=600)
    assert experiment.runs[0].until.mode == "stochastic" and experiment.runs[0].until.episodes == 3
    log: list[str] = []
    before = time.time()
    run_experiment(experiment, log=log.append, registry=registry, report=False)
    record = json.loads((experiment.runs[0].path / "experiment.json").read_text())
    assert record["env_steps"] == 600 and "until" not in record
    # when the run first started training, kept through its three passes (one per check): a protocol
    # registered before the runs can be shown older than each
    first = [line for line in log if "training 600 env steps" in line]
    assert len(first) == 1 and before <= record["started_at"] <= record["finished_at"] <= time.time()
    assert record["finished_at"] - record["started_at"] > 0
    assert [line.split("env step ")[1].split(" ")[0] for line in log if "evaluation at env step" in line] == [
        "200", "400"]
    with open(experiment.runs[0].path / "checks.csv") as handle:
        checks = list(csv.DictReader(handle))
    assert [(c["env_step"], c["metric"], c["target"], c["reached"]) for c in checks] == [
        ("200", "reached", "2", "0"), ("400", "reached", "2", "0")]
    assert all(0.0 <= float(c["value"]) <= 1.0 for c in checks)


@pytest.mark.parametrize("until, message", [
    ('{metric = "reached", value = 1, every = 200, settings = ["nope"]}', "until.settings: unknown setting(s)"),
    ('{metric = "reached", value = nan, every = 200}', "until.value"),
    ('{metric = "reached", value = 1, every = 0}', "until.every = 0: the budget must be a whole"),
    ('{metric = "reached", value = 1, every = 10, mode = "sampled"}', "until.mode = 'sampled'"),
    ('{metric = "reached", value = 1}', "until.every is missing"),
    ('{metric = "reached", value = 1, every = 10, when = 3}', "unknown key(s) ['until.when']"),
])
def test_bad_until_tables_are_one_line(experiment_file, until, message):
    experiment_file.write_text(experiment_file.read_text().replace(
        'settings = ["short"]', f'settings = ["short"]\nuntil = {until}'))
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        load_experiment(experiment_file)


def test_until_needs_evaluation_episodes(experiment_file):
    experiment_file.write_text(experiment_file.read_text().replace("eval_episodes = 3", "eval_episodes = 0").replace(
        'settings = ["short"]', 'settings = ["short"]\nuntil = {metric = "reached", value = 1, every = 10}'))
    with pytest.raises(ConfigError, match=r"until: the target is checked by evaluating eval_episodes episodes"):
        load_experiment(experiment_file)

"""`rlf tune`: search spaces, a study that prunes and writes best.toml, resume after a kill, worker
processes, and one-line errors before any trial starts."""

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
from core.test_cli_errors import assert_one_line_error
from core.test_plugins import TESTS, run_rlf
from sqlalchemy.exc import OperationalError
from support import ROOT, TestPlugin, install_fake_plugin

from rlf import tune
from rlf.config import load_toml
from rlf.errors import ConfigError, RlfError
from rlf.plugins import hookimpl, load_registry
from rlf.resolution import resolve

# max_steps = 1 ends every episode before the walker can reach the end: return 0, a clearly bad trial
SPACE = """
[algo.alpha]
type = "float"
low = 0.1
high = 1.0
log = true

[env.max_steps]
type = "categorical"
choices = [1, 20]

[algo.gamma]
type = "float"
low = 0.5
high = 0.99
when = {"env.max_steps" = 20}
"""
FIXED = ["eval_episodes=2", 'loggers=["csv"]']


@pytest.fixture(scope="module")
def reg():
    return load_registry(extra_plugins=[("test-plugin", TestPlugin())])


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    install_fake_plugin(site, "test", "support:test_plugin")
    return site


def space_file(tmp_path, text=SPACE, name="space.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def options(tmp_path, **changes):
    fields = dict(algorithm="tabular-q", env="line", space=space_file(tmp_path), overrides=["steps=300", *FIXED],
                  trials=3, sampler="random", sampler_seed=0, startup_trials=2, study_dir=tmp_path / "study")
    return tune.TuneOptions(**{**fields, **changes})


# -- the space --------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, fragment", [
    ('[algo.lr]\ntype = "gaussian"\nlow = 0\nhigh = 1', "unknown type 'gaussian'"),
    ('[algo.lr]\ntype = "float"\nlow = 1e-3\nhigh = 1e-5', "must be below high"),
    ('[algo.lr]\ntype = "float"\nlow = 1e-3\nhigh = 1e-3', "must be below high"),
    ('[algo.lr]\ntype = "float"\nlow = 0\nhigh = 1\nlog = true', "a log scale needs low > 0"),
    ('[algo.lr]\ntype = "float"\nlow = 1e-5', "needs low and high"),
    ('[algo.lr]\ntype = "float"\nlo = 1e-5\nhigh = 1', "unknown field 'lo'"),
    ('[algo.epochs]\ntype = "int"\nlow = 1.5\nhigh = 10', "low = 1.5 is not a whole number"),
    ('[algo.act]\ntype = "categorical"\nchoices = []', "choices must be a non-empty list"),
    ('[algo.act]\ntype = "categorical"\nchoices = ["a", "a"]', "lists a value twice"),
    ('[algo.x]\ntype = "float"\nlow = 0\nhigh = 1\nwhen = {"algo.schedule" = "linear"}',
     "algo.schedule is not in the space"),
    ('[algo.s]\ntype = "categorical"\nchoices = ["a"]\n[algo.x]\ntype = "float"\nlow = 0\nhigh = 1\n'
     'when = {"algo.s" = "b"}', "names 'b', which is not one of algo.s's choices"),
    ('[algo.a]\ntype = "categorical"\nchoices = [1, 2]\nwhen = {"algo.b" = 1}\n'
     '[algo.b]\ntype = "categorical"\nchoices = [1, 2]\nwhen = {"algo.a" = 1}', "form a loop"),
    ("[algo]\nlr = 0.1", "is not a parameter table"),
    ('[optimizer.lr]\ntype = "float"\nlow = 0\nhigh = 1', "unknown table [optimizer]"),
    ('[run.seed]\ntype = "int"\nlow = 0\nhigh = 9', "set by rlf tune (--seed and --seeds)"),
    ("", "names no setting"),
])
def test_bad_spaces_are_one_config_error_naming_the_fault(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as caught:
        tune.load_space(space_file(tmp_path, text))
    assert fragment in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_conditional_key_is_sampled_only_under_its_condition(tmp_path):
    text = ('[algo.net.hidden]\ntype = "categorical"\nchoices = [[64, 64], [256]]\n'
            '[algo.decay]\ntype = "float"\nlow = 0.1\nhigh = 0.9\nwhen = {"algo.schedule" = ["linear", "cosine"]}\n'
            '[algo.schedule]\ntype = "categorical"\nchoices = ["constant", "linear", "cosine"]\n')
    space = tune.load_space(space_file(tmp_path, text))
    keys = [param.key for param in space]
    assert keys.index("algo.schedule") < keys.index("algo.decay")  # a condition's key is sampled first
    constant = tune.sample(optuna.trial.FixedTrial({"algo.schedule": "constant", "algo.net.hidden": "[256]"}), space)
    assert constant == {"algo.net.hidden": [256], "algo.schedule": "constant"}
    linear = tune.sample(optuna.trial.FixedTrial({"algo.schedule": "linear", "algo.decay": 0.5,
                                                  "algo.net.hidden": "[64, 64]"}), space)
    assert linear == {"algo.net.hidden": [64, 64], "algo.schedule": "linear", "algo.decay": 0.5}
    assert tune.nested(linear) == {"algo": {"net": {"hidden": [64, 64]}, "schedule": "linear", "decay": 0.5}}


def test_the_example_space_loads_and_is_the_one_the_docs_show():
    example = ROOT / "examples" / "tune_ppo_cartpole.toml"
    body = example.read_text().split("\n\n", 1)[1]  # after the header comment
    assert body.strip() in (ROOT / "docs" / "TUNE.md").read_text()
    space = {param.key: param for param in tune.load_space(example)}
    assert space["algo.lr"].log and space["algo.lr"].low < space["algo.lr"].high
    assert any(param.when for param in space.values())
    assert all(key.startswith(("algo.", "run.", "env.")) for key in space)


# -- checks before any trial ------------------------------------------------------------------------


@pytest.mark.parametrize("changes, fragment", [
    ({"space_text": '[algo.nope]\ntype = "int"\nlow = 1\nhigh = 2'}, "unknown key 'algo.nope'"),
    ({"space_text": '[algo.alpha]\ntype = "float"\nlow = 0.5\nhigh = 2.0'}, "[algo.alpha] at 2.0"),
    ({"sampler": "grid"}, "--sampler 'grid' is not one of tpe, random, cmaes"),
    ({"pruner": "asha"}, "--pruner 'asha' is not one of median, halving, none"),
    ({"storage": "not a url"}, "is not a database URL"),
    ({"storage": "nosuchdb://host/db"}, "no database kind 'nosuchdb'"),
    ({"overrides": ["algo.alpha=0.5"]}, "algo.alpha is searched (the space) and fixed (--set)"),
    ({"jobs": 0}, "--jobs must be a whole number >= 1"),
])
def test_bad_options_are_refused_before_any_trial(reg, tmp_path, changes, fragment):
    text = changes.pop("space_text", None)
    if text is not None:
        changes["space"] = space_file(tmp_path, text, "other.toml")
    with pytest.raises(ConfigError) as caught:
        tune.run(options(tmp_path, **changes), registry=reg, say=lambda line: None)
    assert fragment in str(caught.value)
    assert not (tmp_path / "study").exists()


def test_cmaes_without_its_package_names_it(reg, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cmaes" else real(name, *a))
    with pytest.raises(ConfigError, match="pip install cmaes"):
        tune.plan(options(tmp_path, sampler="cmaes"), registry=reg)


# -- studies ----------------------------------------------------------------------------------------


def enqueue(opts, *points):
    """Trials with chosen settings, so which are bad (and get pruned) is known."""
    study = optuna.create_study(storage=opts.storage_url, study_name=opts.study_name, direction="maximize")
    for point in points:
        study.enqueue_trial(point)


GOOD = {"algo.alpha": 0.5, "env.max_steps": 20, "algo.gamma": 0.9}
BAD = {"algo.alpha": 0.5, "env.max_steps": 1}


def test_a_study_prunes_the_bad_trials_and_writes_a_best_toml_that_train_takes(reg, tmp_path):
    opts = options(tmp_path, trials=4)
    (tmp_path / "study").mkdir()
    enqueue(opts, GOOD, GOOD, BAD)
    lines = []
    result = tune.run(opts, registry=reg, say=lines.append)
    trials = result["trials"]
    states = [t.state.name for t in trials]
    assert len(trials) == 4 and states[:3] == ["COMPLETE", "COMPLETE", "PRUNED"], states
    assert trials[0].value == pytest.approx(0.5)  # the walker reached the end in both evaluation episodes
    assert all(t.params["env.max_steps"] == 1 for t in trials if t.state.name == "PRUNED")
    # runs are normal run directories; a pruned trial's is removed
    assert (tmp_path / "study" / "trial-0-seed0" / "run.json").is_file()
    assert not (tmp_path / "study" / "trial-2-seed0").exists()
    assert result["best_params"]["env.max_steps"] == 20
    # the results table, best first, and best.toml as full tables rlf train --config takes
    table = lines[lines.index("") + 1:]
    assert table[0].split()[:3] == ["trial", "state", "return"] and table[1].split()[1] == "complete"
    best = result["best_file"]
    assert best == tmp_path / "study" / "best.toml"
    assert set(load_toml(best)) >= {"run", "algo", "env"}
    from_file = resolve("tabular-q", "line", config_file=best, registry=reg, preset=True)
    expected = resolve("tabular-q", "line", registry=reg, overrides=[
        "steps=300", *FIXED, "eval_interval=30", *(f"{k}={v}" for k, v in result["best_params"].items())])
    assert from_file.as_dict() == expected.as_dict()


def test_keep_pruned_keeps_their_run_directories(reg, tmp_path):
    opts = options(tmp_path, trials=3, keep_pruned=True, pruner="median")
    (tmp_path / "study").mkdir()
    enqueue(opts, GOOD, GOOD, BAD)
    trials = tune.run(opts, registry=reg, say=lambda line: None)["trials"]
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE", "PRUNED"]
    assert (tmp_path / "study" / "trial-2-seed0" / "run.json").is_file()


def test_several_seeds_average_their_final_evaluations(reg, tmp_path):
    opts = options(tmp_path, trials=1, seeds=2, pruner="none", overrides=["steps=200", "seed=5", *FIXED])
    (tmp_path / "study").mkdir()
    enqueue(opts, GOOD)
    trial = tune.run(opts, registry=reg, say=lambda line: None)["trials"][0]
    per_seed = [trial.user_attrs["seed5"], trial.user_attrs["seed6"]]
    assert trial.value == pytest.approx(sum(per_seed) / 2)
    assert {p.name for p in (tmp_path / "study").iterdir()} >= {"trial-0-seed5", "trial-0-seed6"}


def cli_env(site):
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(site)])}


def tune_command(tmp_path, *extra):
    return [sys.executable, "-m", "rlf.cli.commands", "tune", "tabular-q", "--env", "line", "--space",
            str(space_file(tmp_path)), "--study-dir", str(tmp_path / "study"), "--sampler", "random",
            *(arg for fixed in FIXED for arg in ("--set", fixed)), *extra]


def test_a_killed_study_resumes_from_its_stored_trials(site, tmp_path):
    command = tune_command(tmp_path, "--steps", "600", "--trials", "3", "--sampler-seed", "1")
    storage = f"sqlite:///{(tmp_path / 'study' / 'study.db').resolve()}"
    with open(tmp_path / "first.out", "w") as out:
        first = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=cli_env(site))
    try:
        deadline, running = time.monotonic() + 120, []
        while time.monotonic() < deadline and first.poll() is None:  # kill it inside a trial after the first
            trials = []
            # once a trial has finished the database is made (opening it earlier would make it twice)
            if "\ntrial " in (tmp_path / "first.out").read_text():
                try:
                    trials = optuna.load_study(study_name="tabular-q-line", storage=storage).trials
                except (KeyError, ValueError, OperationalError):  # the study is being made
                    pass
            running = [t for t in trials if t.state.name == "RUNNING" and "pid" in t.user_attrs]
            if running and any(t.state.name == "COMPLETE" for t in trials):
                first.send_signal(signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        first.kill()
        first.wait()
    assert first.returncode == -signal.SIGKILL and running, (tmp_path / "first.out").read_text()
    stored = optuna.load_study(study_name="tabular-q-line", storage=storage).trials
    lost = stored[running[0].number]
    finished = [t.number for t in stored if t.state.name in ("COMPLETE", "PRUNED")]
    again = subprocess.run(command, capture_output=True, text=True, env=cli_env(site), timeout=300)
    assert again.returncode == 0, again.stderr
    assert f"{len(finished)} of 3 trials done" in again.stdout, again.stdout
    assert not any(line.startswith(f"trial {number} ") for number in finished
                   for line in again.stdout.splitlines())  # finished trials are not run again
    assert f"trial {lost.number} was lost with its process: queued again with its settings" in again.stdout
    trials = optuna.load_study(study_name="tabular-q-line", storage=storage).trials
    assert trials[lost.number].state.name == "FAIL"
    retry = next(t for t in trials if t.user_attrs.get("retry_of") == lost.number)
    assert retry.params == lost.params and retry.state.name in ("COMPLETE", "PRUNED")
    assert sum(t.state.name in ("COMPLETE", "PRUNED") for t in trials) == 3
    partial = tmp_path / "study" / f"trial-{lost.number}-seed0"
    assert not partial.exists(), sorted(p.name for p in partial.iterdir())  # the lost trial's partial run
    assert (tmp_path / "study" / "best.toml").is_file()


def test_jobs_runs_trials_in_separate_processes(site, tmp_path):
    command = tune_command(tmp_path, "--steps", "200", "--trials", "2", "--jobs", "2", "--pruner", "none")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(site))
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    storage = f"sqlite:///{(tmp_path / 'study' / 'study.db').resolve()}"
    trials = optuna.load_study(study_name="tabular-q-line", storage=storage).trials
    pids = {t.user_attrs["pid"] for t in trials}
    assert len(trials) == 2 and len(pids) == 2 and process.pid not in pids
    assert all(t.state.name == "COMPLETE" for t in trials)
    assert out.count("\ntrial ") + out.startswith("trial ") >= 2


# -- the command line -------------------------------------------------------------------------------


def test_cli_errors_are_one_line_with_exit_2_and_start_no_trial(site, tmp_path):
    bad = space_file(tmp_path, '[algo.alpha]\ntype = "float"\nlow = 0\nhigh = 1\nlog = true', "bad.toml")
    assert_one_line_error(run_rlf("tune", "tabular-q", "--env", "line", "--space", str(bad), "--study-dir",
                                  str(tmp_path / "a"), site=site), "a log scale needs low > 0")
    assert_one_line_error(run_rlf("tune", "tabular-q", "--env", "line", "--space", str(space_file(tmp_path)),
                                  "--storage", "nosuchdb://x/y", "--study-dir", str(tmp_path / "b"), site=site),
                          "--storage", "nosuchdb")
    assert_one_line_error(run_rlf("tune", "tabular-q", "--env", "line", "--space", str(space_file(tmp_path)),
                                  "--sampler", "grid", "--study-dir", str(tmp_path / "c"), site=site),
                          "--sampler 'grid'")
    assert not any((tmp_path / name).exists() for name in "abc")


def test_help_and_list_do_not_import_optuna(site):
    code = ("import sys\nfrom rlf.cli.commands import main\nmain(['list'])\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\nprint('optuna' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(site),
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"


# -- launchers (rlf_register_tune_launchers) --------------------------------------------------------


class InlineLauncher:
    """A tune launcher plugin registered in-process: runs the workers one after another, here."""

    RLF_API_VERSION = 1

    def __init__(self):
        self.jobs = []

    @hookimpl
    def rlf_register_tune_launchers(self, register):
        register("inline", launch=self.launch, check=self.check, description="the workers one after another")

    def check(self, job):
        if job.address == "nowhere":
            raise ConfigError("--address 'nowhere' is not a cluster of the inline launcher")

    def launch(self, job):
        self.jobs.append(job)
        for index in range(job.workers):
            job.run_worker(index)
            job.poll()


def test_a_plugin_launcher_runs_the_workers_of_a_study(tmp_path, monkeypatch, capsys):
    ray_before = "ray" in sys.modules
    plugin = InlineLauncher()
    registry = load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("inline", plugin)])
    assert registry.launcher("inline").plugin == "inline" and registry.plugins["inline"].launchers == ["inline"]
    assert registry.launcher("processes") is None  # the core's own: worker processes on this machine
    monkeypatch.setattr("rlf.plugins.loading._cached", registry)  # what a worker that loads plugins would find
    monkeypatch.chdir(tmp_path)
    result = tune.run(options(tmp_path, jobs=2, pruner="none", launcher="inline", study_dir=tmp_path.name + "-s"),
                      registry)
    [job] = plugin.jobs
    assert job.workers == 2 and job.options.directory == tmp_path / f"{tmp_path.name}-s"  # absolute for every worker
    assert job.address is None and job.default_storage
    trials = result["trials"]
    assert len(trials) == 3 and all(t.state.name == "COMPLETE" for t in trials)
    assert result["best_file"] == job.options.directory / "best.toml" and result["best_file"].is_file()
    out = capsys.readouterr().out
    assert "2 worker(s) on launcher inline (its default address)" in out
    assert sorted(line.split()[1] for line in out.splitlines() if line.startswith("trial ") and "complete" in line) \
        == ["0", "1", "2"]  # each trial's line once, printed by job.poll as local workers print it
    assert ("ray" in sys.modules) == ray_before  # the core's path to a launcher imports no Ray


def test_launcher_errors_come_before_any_trial(tmp_path):
    registry = load_registry(extra_plugins=[("test-plugin", TestPlugin()), ("inline", InlineLauncher())])
    with pytest.raises(RlfError, match="unknown launcher 'inlin': did you mean 'inline'\\?.*installed: processes, "):
        tune.run(options(tmp_path, launcher="inlin"), registry)
    with pytest.raises(ConfigError, match="'nowhere' is not a cluster"):
        tune.run(options(tmp_path, launcher="inline", address="nowhere"), registry)
    with pytest.raises(ConfigError, match="--address 'local' is the address of a launcher's cluster"):
        tune.run(options(tmp_path, address="local"), registry)
    assert not (tmp_path / "study").exists()


def test_a_launcher_may_not_take_the_core_name(tmp_path):
    class Impostor:
        RLF_API_VERSION = 1

        @hookimpl
        def rlf_register_tune_launchers(self, register):
            register("processes", launch=lambda job: None)

    registry = load_registry(extra_plugins=[("impostor", Impostor())])
    assert "reserved" in registry.plugins["impostor"].error and registry.launcher("processes") is None


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # study.ask(), standing in for another worker
def test_a_trial_started_past_trials_by_a_stale_count_ends_unrun_and_unlisted(reg, tmp_path, monkeypatch, capsys):
    # another worker's trial is running; this worker's check of the count came before it (a race made certain)
    opts = options(tmp_path, trials=1, pruner="none")
    (tmp_path / "study").mkdir()
    study = tune._open_study(opts, create=True)
    study.ask()
    counts = iter([0])
    real = tune._counted
    monkeypatch.setattr(tune, "_counted", lambda trials: next(counts, real(trials)))
    tune.work(opts, 0, reg)
    surplus = study.get_trials(deepcopy=False)[1]
    assert surplus.state.name == "FAIL" and surplus.user_attrs == {"surplus": True} and not surplus.params
    assert not list((tmp_path / "study").glob("trial-1-*")) and "trial 1" not in capsys.readouterr().out
    assert not tune._lost(surplus) and tune._counted(study.get_trials(deepcopy=False)) == 1  # not retried on resume

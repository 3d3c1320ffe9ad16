"""`rlf new KIND NAME`: the plugins generated from every template install, pass their own tests (which
train them through rlf's loop) and train together from the command line; bad names and options are
one-line errors with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
from support import child_env, pip_install

from rlf.cli import scaffold
from rlf.cli.commands import main

# name -> (kind, options) of one plugin per template; the names mix '-' and '_' on purpose
PLUGINS = {
    "my-algo": ("algorithm", []),
    "my-q": ("algorithm", ["--family", "off-policy"]),
    "my_corridor": ("environment", []),
    "my-meet": ("environment", ["--multi-agent"]),
    "my-family": ("strategy", []),
    "my-count": ("collector", []),
    "my-jsonl": ("logger", []),
    "my-plateau": ("callback", []),
}
ENV = {**os.environ, "PYTHONPATH": "", "OMP_NUM_THREADS": "1"}


def directory_of(parent: Path, name: str) -> Path:
    return parent / scaffold.names(name)["dist"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """Every template's plugin, written by `rlf new` and installed together in one child venv."""
    parent = tmp_path_factory.mktemp("plugins")
    for name, (kind, options) in PLUGINS.items():
        assert main(["new", kind, name, "--dir", str(parent), *options]) == 0
    python = child_env(parent / "venv")
    for name in PLUGINS:
        pip_install(python, directory_of(parent, name))
    return python, parent


def rlf_cli(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "rlf.cli.commands", *args], capture_output=True, text=True, env=ENV,
                          cwd=cwd, timeout=300)


def test_rlf_new_writes_a_plugin_and_says_what_next(tmp_path: Path, capsys):
    assert main(["new", "algorithm", "my-algo", "--dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "rlf-plugin-my-algo" in printed and "pytest" in printed and "rlf train my-algo" in printed
    algo_dir = tmp_path / "rlf-plugin-my-algo"
    pyproject = (algo_dir / "pyproject.toml").read_text()
    assert 'my-algo = "rlf_plugin_my_algo.plugin"' in pyproject and "rlf>=0.2,<0.3" in pyproject
    assert "RLF_API_VERSION = 1" in (algo_dir / "src" / "rlf_plugin_my_algo" / "plugin.py").read_text()
    assert main(["new", "collector", "my-count", "--dir", str(tmp_path)]) == 0
    assert "--set vector=my-count" in capsys.readouterr().out


def test_every_template_is_written_whole(installed):
    _, parent = installed
    for name in PLUGINS:
        values = scaffold.names(name)
        directory = directory_of(parent, name)
        assert f'{name} = "{values["package"]}.plugin"' in (directory / "pyproject.toml").read_text()
        assert "RLF_API_VERSION = 1" in (directory / "src" / values["package"] / "plugin.py").read_text()
        assert (directory / "README.md").is_file() and (directory / "tests" / f"test_{values['package']}.py").is_file()
    assert not list(parent.rglob("*.tmpl")) and not list(parent.rglob("PACKAGE")) and not list(parent.rglob("*$*"))


def test_every_template_folder_has_a_command():
    folders = {entry.name for entry in (resources.files("rlf.cli") / "templates").iterdir() if entry.is_dir()}
    folders.discard("__pycache__")
    reachable = {scaffold.template(kind, *options) for kind, options in
                 [(kind, ()) for kind in scaffold.KINDS] + [("algorithm", ("off-policy",)),
                                                             ("environment", (None, True))]}
    assert folders == reachable == set(scaffold.NEXT)


@pytest.mark.parametrize("name", list(PLUGINS))
def test_generated_plugin_passes_its_own_tests(installed, name):
    python, parent = installed
    directory = directory_of(parent, name)
    tested = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory / "tests")],
                            cwd=parent, capture_output=True, text=True, env=ENV, timeout=300)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout and "skipped" not in tested.stdout


def test_generated_plugins_are_listed(installed):
    python, parent = installed
    listing = rlf_cli(python, "list", cwd=parent)
    assert listing.returncode == 0, listing.stderr
    for name in PLUGINS:
        assert name in listing.stdout


def test_an_algorithm_and_an_environment_train_from_the_command_line(installed):
    python, parent = installed
    for algorithm in ("my-algo", "my-family", "my-q"):  # on-policy, the generated family, off-policy
        run = parent / f"run-{algorithm}"
        trained = rlf_cli(python, "train", algorithm, "--env", "my_corridor", "--steps", "512", "--no-progress",
                          "--run-dir", str(run), cwd=parent)
        assert trained.returncode == 0, trained.stderr[-3000:]
        assert (run / "checkpoint.rlf").is_file()


def test_collector_logger_and_callback_train_a_multi_agent_env_and_resume(installed):
    python, parent = installed
    run, report = parent / "run-together", parent / "report.json"
    trained = rlf_cli(python, "train", "my-q", "--env", "my-meet", "--steps", "512", "--no-progress",
                      "--run-dir", str(run), "--set", "vector=my-count", "--set", f"collector.report={report}",
                      "--set", "log_interval=128", "--set", 'loggers=["csv", "my-jsonl"]',
                      "--set", 'callbacks=["my-plateau"]', "--set", "callback.my-plateau.patience=1000", cwd=parent)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert json.loads(report.read_text())["env_steps"] == 512
    resumed = rlf_cli(python, "train", "--resume", str(run), "--steps", "1024", "--no-progress", cwd=parent)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert json.loads(report.read_text())["resumed_at"] == [512]
    rows = [json.loads(line) for line in (run / "my-jsonl.jsonl").read_text().splitlines()]
    assert [row["env_step"] for row in rows] == list(range(128, 1024 + 1, 128))
    assert {"mean_return/walker_0", "mean_met"} <= set(rows[-1])
    state = subprocess.run([str(python), "-c", "import sys, json, rlf; print(json.dumps(rlf.checkpoint.load(sys.argv[1])"
                            "['callbacks']['callback.my-plateau']))", str(run / "checkpoint.rlf")],
                           capture_output=True, text=True, env=ENV, timeout=120)
    assert state.returncode == 0, state.stderr[-2000:]
    assert json.loads(state.stdout)["seen"] == 8  # a metrics row every 128 env steps, counted across the resume


@pytest.mark.parametrize(("argv", "expected"), [
    (["new", "algorithm", "My Algo"], "not usable"),
    (["new", "algorithm", "2fast"], "not usable"),
    (["new", "environment", "a--b"], "not usable"),
    (["new", "callback", "Stop"], "not usable"),
    (["new", "algorithm", "class"], "Python keyword"),
    (["new", "environment", "rlf"], "already provides"),
    (["new", "logger", "csv"], "already provides"),
    (["new", "strategy", "on-policy"], "already provides"),
    (["new", "collector", "auto"], "reserved"),
    (["new", "plugin", "mine"], "cannot make a plugin of kind 'plugin'"),
    (["new", "algorithm", "mine", "--family", "async-workers"], "no algorithm template for family"),
    (["new", "strategy", "mine", "--family", "off-policy"], "--family is for `rlf new algorithm`"),
    (["new", "collector", "mine", "--multi-agent"], "--multi-agent is for `rlf new environment`"),
])
def test_bad_names_and_options_are_one_line_errors(argv, expected, tmp_path: Path, capsys):
    assert main([*argv, "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlf: error: ") and expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_an_existing_directory_is_never_overwritten(tmp_path: Path, capsys):
    target = tmp_path / "rlf-plugin-mine"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    for kind in scaffold.KINDS:
        assert main(["new", kind, "mine", "--dir", str(tmp_path)]) == 2
        assert "already exists" in capsys.readouterr().err
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


def test_names_follow_the_projects_conventions():
    values = scaffold.names("my-algo")
    assert values["package"] == "rlf_plugin_my_algo" and values["dist"] == "rlf-plugin-my-algo"
    assert values["Class"] == "MyAlgo"
    assert sys.modules["rlf"].__version__.startswith("0.2")

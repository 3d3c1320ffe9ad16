"""`rlf new algorithm|environment NAME`: the generated plugins install, pass their own tests (which train
them through rlf's loop), and bad names are one-line errors with exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import child_env, pip_install

from rlf.cli import scaffold
from rlf.cli.commands import main


def test_generated_plugins_install_pass_their_tests_and_train(tmp_path: Path, capsys):
    assert main(["new", "algorithm", "my-algo", "--dir", str(tmp_path)]) == 0
    assert main(["new", "environment", "my_corridor", "--dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "rlf-plugin-my-algo" in printed and "pytest" in printed
    algo_dir, env_dir = tmp_path / "rlf-plugin-my-algo", tmp_path / "rlf-plugin-my-corridor"
    pyproject = (algo_dir / "pyproject.toml").read_text()
    assert 'my-algo = "rlf_plugin_my_algo.plugin"' in pyproject and "rlf>=0.1,<0.2" in pyproject
    assert "RLF_API_VERSION = 1" in (algo_dir / "src" / "rlf_plugin_my_algo" / "plugin.py").read_text()
    assert (env_dir / "src" / "rlf_plugin_my_corridor" / "env.py").is_file()
    assert not list(tmp_path.rglob("*.tmpl")) and not list(tmp_path.rglob("PACKAGE"))

    python = child_env(tmp_path / "venv")
    pip_install(python, algo_dir)
    pip_install(python, env_dir)
    env = {**os.environ, "PYTHONPATH": "", "OMP_NUM_THREADS": "1"}
    listing = subprocess.run([str(python), "-m", "rlf.cli.commands", "list"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "my-algo" in listing.stdout and "my_corridor" in listing.stdout
    for directory in (algo_dir, env_dir):
        tested = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory / "tests")],
                                cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
        assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
        assert " passed" in tested.stdout and "skipped" not in tested.stdout
    # the two generated plugins work together, from the command line
    trained = subprocess.run([str(python), "-m", "rlf.cli.commands", "train", "my-algo", "--env", "my_corridor",
                              "--steps", "512", "--no-progress", "--run-dir", str(tmp_path / "run")],
                             capture_output=True, text=True, env=env, timeout=300)
    assert trained.returncode == 0, trained.stderr[-3000:]
    assert (tmp_path / "run" / "checkpoint.rlf").is_file()


@pytest.mark.parametrize(("argv", "expected"), [
    (["new", "algorithm", "My Algo"], "not usable"),
    (["new", "algorithm", "2fast"], "not usable"),
    (["new", "environment", "a--b"], "not usable"),
    (["new", "algorithm", "class"], "Python keyword"),
    (["new", "environment", "rlf"], "already provides"),
])
def test_bad_names_are_one_line_errors(argv, expected, tmp_path: Path, capsys):
    assert main([*argv, "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing written


def test_an_existing_directory_is_never_overwritten(tmp_path: Path, capsys):
    target = tmp_path / "rlf-plugin-mine"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    assert main(["new", "algorithm", "mine", "--dir", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


def test_names_follow_the_projects_conventions():
    values = scaffold.names("my-algo")
    assert values["package"] == "rlf_plugin_my_algo" and values["dist"] == "rlf-plugin-my-algo"
    assert values["Class"] == "MyAlgo"
    assert sys.modules["rlf"].__version__.startswith("0.1")

"""A sample of the bad-input corpus as real processes: the exit code the shell sees, one stderr line,
no traceback, and nothing written."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest
from faults import error_lines

CASES = {
    "bool-for-int": ["train", "random", "--env", "gym:CartPole-v1", "--set", "steps=true"],
    "algorithm-via-set": ["train", "random", "--env", "gym:CartPole-v1", "--set", "algorithm=dqn"],
    "env-not-a-name": ["train", "random", "--set", "env=5"],
    "tuple-observations": ["train", "appo", "--env", "gym:Blackjack-v1", "--steps", "10"],  # appo reads arrays only
    "config-is-a-directory": ["train", "random", "--env", "gym:CartPole-v1", "--config", "."],
    "argparse": ["train", "random", "--steps", "many"],
    "device": ["train", "random", "--env", "gym:CartPole-v1", "--steps", "10", "--set", 'device="cuda:99"'],
    "resume-changes-env": ["train", "--resume", "nope", "--set", 'env="gym:Acrobot-v1"'],
}


@pytest.mark.parametrize("argv", CASES.values(), ids=CASES.keys())
def test_real_process_exit_code_and_one_line(argv, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RLF_STRICT_PLUGINS", None)
    result = subprocess.run([sys.executable, "-m", "rlf.cli.commands", *argv], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and len(error_lines(result.stderr)) == 1, result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
def test_a_full_disk_or_unwritable_run_is_one_line(code, tmp_path, monkeypatch, capsys):
    """The filesystem refusing a checkpoint write (a real full disk is rel-a's tmpfs test) ends in one
    line naming the file and the fix, exit 2; the error reaches the CLI as the OSError the OS gives."""
    from rlf.cli import commands as cli
    from rlf.storage import checkpoint

    def refuse(path, *args, **kwargs):
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(checkpoint, "save", refuse)
    capsys.readouterr()
    result = cli.main(["train", "random", "--env", "gym:CartPole-v1", "--steps", "16", "--no-progress",
                       "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert result == 2 and "Traceback" not in err
    [line] = error_lines(err)
    assert os.strerror(code) in line and "checkpoint.rlf" in line and ("--run-dir" in line or "permissions" in line)


def test_a_broken_pipe_that_is_not_stdout_is_not_a_clean_exit(monkeypatch):
    """Main turned every BrokenPipeError into exit 0, so a lost env worker looked like success."""
    from rlf.cli import commands as cli

    def lost_worker(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_list", lost_worker)
    with pytest.raises(BrokenPipeError):
        cli.main(["list"])


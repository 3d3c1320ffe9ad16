"""scripts/test_background.sh, which CI (.ci/run) runs after the matrix: one env started as a script's
background job under nohup, so the tests keep passing however they are started. Each case gives it a
stand-in tox that records what it was started with, so no env runs for real."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "test_background.sh"
BASH = shutil.which("bash")


def _tools(tmp_path: Path, exit_code: int) -> tuple[Path, Path]:
    """A tools venv whose tox writes its arguments, SigIgn mask and stdin target, then exits ``exit_code``."""
    record = tmp_path / "record"
    tox = tmp_path / "tools" / "bin" / "tox"
    tox.parent.mkdir(parents=True)
    tox.write_text(f"#!{BASH}\n"
                   f'{{ echo "$*"; grep "^SigIgn:" /proc/self/status; readlink /proc/self/fd/0; }} > {record}\n'
                   f'echo "  core: done"\nexit {exit_code}\n')
    tox.chmod(0o755)
    return tox.parent.parent, record


def _run(tools: Path, *args: str) -> subprocess.CompletedProcess:
    # started the way a terminal would start it: default dispositions, whatever this test run inherited
    def terminal_like():
        for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)

    env = {**os.environ, "RLF_TOOLS_VENV": str(tools)}
    return subprocess.run([BASH, str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60,
                          preexec_fn=terminal_like)


def test_the_env_runs_as_a_background_job_with_the_signals_a_shell_ignores_there(tmp_path):
    tools, record = _tools(tmp_path, 0)
    done = _run(tools)
    assert done.returncode == 0, done.stdout + done.stderr
    args, sigign, stdin = record.read_text().splitlines()
    assert args == "run -e core"
    mask = int(sigign.split()[1], 16)
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
        assert mask & (1 << (signum - 1)), f"{signum!r} not ignored: {sigign}"
    assert stdin == "/dev/null"
    assert done.stdout.splitlines()[-1].startswith("test_background.sh: env core passed as a background job")


def test_a_failing_env_fails_the_script_and_shows_its_log(tmp_path):
    tools, record = _tools(tmp_path, 1)
    done = _run(tools, "reliability")
    assert done.returncode == 1
    assert record.read_text().splitlines()[0] == "run -e reliability"
    assert "  core: done" in done.stdout  # the env's log, above the closing line
    assert done.stdout.splitlines()[-1].startswith("test_background.sh: env reliability FAILED (exit 1)")


def test_without_the_tools_venv_it_says_what_to_run_first(tmp_path):
    done = _run(tmp_path / "none")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "run scripts/test.sh first" in done.stderr and "Traceback" not in done.stderr


def test_ci_runs_it_after_the_matrix():
    lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if not line.startswith("#")]
    assert lines.index("bash scripts/test.sh") < lines.index("exec bash scripts/test_background.sh core")

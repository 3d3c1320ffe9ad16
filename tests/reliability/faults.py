"""Helpers the fault-injection tests share: run the CLI for real, find its env worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def start_rlf(*args: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RLF_STRICT_PLUGINS", None)
    return subprocess.Popen([sys.executable, "-m", "rlf.cli.commands", *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (Linux /proc; no psutil in the test env)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def env_workers(pid: int) -> list[int]:
    """The env worker processes of ``pid``: its multiprocessing-spawned children, or the children of
    its fork server (rlf.envs.workers.worker_context), not its resource tracker."""
    workers = []
    for child in children(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"spawn_main" in command:
            workers.append(child)
        elif b"multiprocessing.forkserver" in command:
            workers.extend(children(child))
    return sorted(workers)


def wait_for(predicate, timeout: float, what: str, process: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"rlf ended (exit {process.returncode}) before {what}: {process.stderr.read()}")
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rlf: error:")]


def needs_extra(**kwargs):
    """A Gymnasium entry point whose dependency is missing, as Box2D's envs are without gymnasium[box2d]."""
    import gymnasium

    raise gymnasium.error.DependencyNotInstalled('Box2D is not installed, you can install it by run `pip install '
                                                 'swig` followed by `pip install "gymnasium[box2d]"`')


def snapshot(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``roots`` with its size and modification time, to prove nothing was touched."""
    found = {}
    for root in roots:
        for path in [root, *sorted(root.rglob("*"))]:
            stat = path.lstat()
            found[str(path)] = (stat.st_size if path.is_file() else -1, stat.st_mtime_ns)
    return found


def assert_refused_in_one_line(argv: list[str], fixtures: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """Run the CLI in-process on ``argv`` (``{fixtures}`` and ``{run}`` filled in) from an empty working
    directory: exit 2, one ``rlf: error:`` line (warnings aside), no traceback, nothing under the working
    directory or the fixtures created, changed or removed."""
    from rlf.cli import commands as cli

    sandbox = tmp_path / "cwd"  # default run directories, plots and experiment runs would appear here
    sandbox.mkdir()
    monkeypatch.chdir(sandbox)
    argv = [arg.replace("{fixtures}", str(fixtures)).replace("{run}", str(fixtures / "run")) for arg in argv]
    before = snapshot(sandbox, fixtures)
    capsys.readouterr()
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse exits instead of returning
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (argv, out, err)
    assert "Traceback" not in err + out
    lines = [line for line in err.splitlines() if not line.startswith("rlf: warning:")]
    assert len(lines) == 1 and lines[0].startswith("rlf: error: "), err
    assert snapshot(sandbox, fixtures) == before, "a file was created, changed or removed"

"""The signal tests pass however the test run was started. A shell starts a background job (`cmd &` in a
script) and `nohup` with SIGINT and SIGQUIT (and SIGHUP) ignored, often with stdin closed; a test that
relied on the dispositions it inherited failed there and only there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

SIGNAL_TESTS = Path(__file__).with_name("test_sigterm.py")
ROOT = Path(__file__).resolve().parents[2]


def _as_a_background_job() -> None:
    for signum in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    os.close(0)


def test_the_signal_tests_pass_with_sigint_ignored_and_stdin_closed(tmp_path):
    done = subprocess.run([sys.executable, "-P", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'pytest'}", str(SIGNAL_TESTS)],
                          cwd=ROOT, preexec_fn=_as_a_background_job, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

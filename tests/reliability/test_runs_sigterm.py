"""`rlf train` stopped with SIGTERM (as `kill`, `docker stop` and Kubernetes stop it) saves a checkpoint and
exits as Ctrl-C does: the interrupted line, exit 130, no traceback, and the run resumes from where it was."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from fault_support import child_env, default_signals, make_site, rlf

from rlf.storage import checkpoint as ckpt


def test_sigterm_checkpoints_and_exits_130_and_the_run_resumes(tmp_path):
    site = make_site(tmp_path / "site")
    run = tmp_path / "run"
    child = subprocess.Popen([sys.executable, "-m", "rlf.cli.commands", "train", "random", "--env", "gym:CartPole-v1",
                              "--steps", "100000000", "--run-dir", str(run), "--no-progress",
                              "--set", "log_interval=500", "--set", "checkpoint_interval=0"],
                             cwd=tmp_path, env=child_env(site), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, preexec_fn=default_signals)
    deadline = time.monotonic() + 120
    while not ((run / "metrics.csv").is_file() and len((run / "metrics.csv").read_text().splitlines()) > 1):
        assert child.poll() is None and time.monotonic() < deadline, child.stderr.read() if child.poll() else "slow"
        time.sleep(0.2)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("rlf:")]
    assert len(lines) == 1 and "interrupted at env step" in lines[0] and f"rlf train --resume {run}" in lines[0], err
    at = ckpt.load(run / "checkpoint.rlf")["counters"]["env_steps"]
    assert at >= 500
    resumed = rlf("train", "--resume", str(run), "--steps", str(at + 200), "--no-progress", site=site, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert ckpt.load(run / "checkpoint.rlf")["counters"]["env_steps"] >= at + 200

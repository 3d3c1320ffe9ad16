"""Helpers for the run and checkpoint fault tests (tests/reliability/test_runs_*.py, test_checkpoint_*.py).

Runs use the numpy test plugins of ``support`` (no torch: a process starts in about a second) through
the real ``rlf`` command line in a subprocess, so exit codes, stderr and kills are the real thing.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

from support import install_fake_plugin

TESTS = Path(__file__).parent

# An env whose rewards turn NaN after ``nan_after`` steps (counted over the env's life, across resets),
# so a run has a good checkpoint before the fault.
NAN_ENV_SOURCE = '''
import numpy as np
import gymnasium as gym
from pydantic import Field
from rlf import EnvConfig, hookimpl


class NanConfig(EnvConfig):
    """A 4-state corridor whose reward becomes NaN after nan_after steps."""

    nan_after: int = Field(100, ge=0, description="Steps before rewards become NaN.")
    nan_obs: bool = Field(False, description="Make the observation NaN instead of the reward.")


class NanEnv(gym.Env):
    observation_space = gym.spaces.Box(0.0, 3.0, shape=(1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config, render_mode=None):
        self.config, self.t, self.pos = config, 0, 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        self.pos = max(0, min(3, self.pos + (1 if action == 1 else -1)))
        bad = self.t > self.config.nan_after
        reward = float("nan") if bad and not self.config.nan_obs else float(self.pos == 3)
        obs = np.array([float("nan") if bad and self.config.nan_obs else self.pos], dtype=np.float32)
        return obs, reward, self.pos == 3, False, {}


def make(config, render_mode=None):
    return gym.wrappers.TimeLimit(NanEnv(config, render_mode), 20)


class NanPlugin:
    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_environments(self, register):
        register("nan-corridor", build_env="rlf_nan_env:make", config=NanConfig)


plugin = NanPlugin()
'''


def make_site(root: Path) -> Path:
    site = root / "site"
    site.mkdir(parents=True, exist_ok=True)
    install_fake_plugin(site, "test", "support:test_plugin")
    install_fake_plugin(site, "nan", "rlf_nan_env:plugin", NAN_ENV_SOURCE, module="rlf_nan_env")
    return site


def child_env(site: Path, **extra: str) -> dict[str, str]:
    # a PYTHONPATH the tests run under (a checkout tested against an installed rlf) comes after them
    paths = [str(TESTS), str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1", **extra}
    env.pop("RLF_STRICT_PLUGINS", None)
    return env


def default_signals() -> None:
    """``preexec_fn`` of a child that a test signals: it starts with the dispositions a terminal gives, not
    those this test run inherited (a background job or nohup ignores SIGINT, SIGQUIT and SIGHUP)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def rlf(*args: str, site: Path, cwd: Path | None = None, timeout: float = 120, **extra: str):
    return subprocess.run([sys.executable, "-m", "rlf.cli.commands", *args], capture_output=True, text=True,
                          env=child_env(site, **extra), cwd=cwd, timeout=timeout)


def assert_one_line_error(result, *fragments: str, code: int = 2) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("rlf: error:")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    if not path.is_file() or not path.stat().st_size:
        return [], []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def assert_history_consistent(run_dir: Path, upto: int | None = None, complete: bool = True) -> None:
    """metrics.csv env_step strictly increasing; episodes.csv episode numbers 1, 2, 3, ... in order,
    env_step never going back; nothing non-finite; with ``upto``, no row past that env step.
    ``complete=False`` allows a last row cut short by a kill (the next start drops it)."""
    for name, key in (("metrics.csv", "env_step"), ("episodes.csv", "episode")):
        columns, rows = read_csv(run_dir / name)
        if not complete and rows and any(v in (None, "") for v in rows[-1].values()):
            rows = rows[:-1]
        steps = [float(row["env_step"]) for row in rows]
        assert steps == sorted(steps), f"{name}: env_step goes back: {steps}"
        if upto is not None:
            assert not steps or steps[-1] <= upto, f"{name}: rows after env step {upto}: {steps[-5:]}"
        for row in rows:
            assert not any(v.lower() in ("nan", "inf", "-inf") for v in row.values() if v), f"{name}: {row}"
        if key == "env_step":
            assert len(set(steps)) == len(steps), f"{name}: repeated env steps {steps}"
        else:
            episodes = [int(float(row["episode"])) for row in rows]
            assert episodes == list(range(1, len(episodes) + 1)), f"{name}: episode numbers {episodes[-10:]}"


def tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size: to prove nothing outside a run directory was touched."""
    # Bytecode caches are Python's, written when a child imports a test module beside the run: not ours.
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}

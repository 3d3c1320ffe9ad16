"""Faults and costs on demand, for the tests and benchmarks of this plugin and of collectors like it.

``flaky`` is CartPole whose env copies can kill the process they run in (as a segfault or the
out-of-memory killer would), hold a step until the test says go, or burn a set CPU time per step
(an emulator's cost without the emulator). Its builder lives here, in an
installed module, because Ray's workers import it by name. Register it in a test with
``rlf.plugins.loading.load_registry(extra_plugins=[("flaky", FlakyEnvPlugin())])``.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import gymnasium
from pydantic import Field

from rlf import EnvConfig, hookimpl


class FlakyConfig(EnvConfig):
    """CartPole with scripted faults; ``signals`` is a directory both the test and the envs see."""

    signals: str = Field("", description="Directory of the marker files (empty: no faults).")
    crashes: int = Field(0, ge=0, description="How many times, in all, an env kills its process.")
    crash_at: int = Field(20, ge=1, description="Steps an env takes (since it was built) before it may crash.")
    hold_at: int = Field(0, ge=0, description="The first env to reach this many steps waits for the file "
                                              "`go` (0: never); it writes `held` first.")
    step_cost_us: float = Field(0.0, ge=0.0, description="CPU time each step burns, in microseconds.")


class FlakyEnv(gymnasium.Wrapper):
    def __init__(self, config: FlakyConfig):
        super().__init__(gymnasium.make("CartPole-v1"))
        self.config = config
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.config.step_cost_us:
            _burn(self.config.step_cost_us * 1e-6)
        config, signals = self.config, Path(self.config.signals)
        if config.signals and self.steps == config.crash_at and _claim(signals, "crash", config.crashes):
            os.kill(os.getpid(), signal.SIGKILL)
        if config.signals and config.hold_at and self.steps == config.hold_at and _claim(signals, "hold", 1):
            (signals / "held").write_text(str(os.getpid()))
            while not (signals / "go").exists():
                time.sleep(0.05)
        return self.env.step(action)


def _burn(seconds: float) -> None:
    """Keeps this process's CPU busy (not asleep) for ``seconds`` of its own CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def _claim(directory: Path, kind: str, count: int) -> bool:
    """Takes one of ``count`` numbered tokens, atomically across processes; False when none is left."""
    for index in range(count):
        try:
            os.close(os.open(directory / f"{kind}.{index}", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            continue
    return False


def make_flaky_env(config: FlakyConfig, render_mode: str | None = None) -> FlakyEnv:
    return FlakyEnv(config)


class FlakyEnvPlugin:
    """A plugin object registering the ``flaky`` environment."""

    RLF_API_VERSION = 1

    @hookimpl
    def rlf_register_environments(self, register):
        register("flaky", build_env="rlf_plugin_ray.testing:make_flaky_env", config=FlakyConfig)

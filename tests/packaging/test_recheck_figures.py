"""scripts/recheck_figures.py, run before a release (not in CI): its listing, its usage errors and its
comparisons, without training anything."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "recheck_figures.py"


def _module():
    spec = importlib.util.spec_from_file_location("recheck_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_list_names_every_figure_its_command_and_published_numbers_and_runs_nothing():
    done = _run("--list")
    assert done.returncode == 0, done.stderr
    for name in ("dqn-cartpole-preset", "dqn-cartpole-defaults", "ppo-cartpole-preset", "sac-pendulum"):
        assert f"\n{name}\n" in f"\n{done.stdout}"  # the minutes-long ones are rechecked
    assert "mario-1-1-preset  (not rechecked: hours; --all runs it)" in done.stdout
    assert "rlf train dqn --env gym:CartPole-v1 --steps 50000 --seed S (greedy)" in done.stdout
    assert "published (seeds 0, 1, 2): 500, 500, 500" in done.stdout
    assert _run("--dry-run", "--only", "sac-pendulum").stdout.startswith("sac-pendulum\n")


def test_an_unknown_figure_is_one_line_and_exit_2():
    done = _run("--only", "dqn-mario")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown figure(s) dqn-mario" in done.stderr


def test_the_comparisons_say_which_no_longer_reproduce(tmp_path):
    module = _module()
    figures = {figure.name: figure for figure in module.FIGURES}
    assert module.reproduces(figures["dqn-cartpole-preset"], [500.0, 500.0, 500.0])[0]
    assert module.reproduces(figures["dqn-cartpole-preset"], [500.0, 140.6, 164.0]) == (False, "1/3 seeds >= 195")
    assert not module.reproduces(figures["ppo-cartpole-preset"], [57_000.0, None, 60_000.0])[0]
    assert module.reproduces(figures["ppo-cartpole-preset"], [60_000.0, 52_000.0, 58_000.0])[0]
    assert not module.reproduces(figures["sac-pendulum"], [-110.0, -400.0, -105.0])[0]
    episodes = tmp_path / "episodes.csv"
    rows = [f"{(i + 1) * 500},{i},500,500.0" for i in range(100)]
    episodes.write_text("env_step,episode,length,return\n10,0,10,10.0\n" + "\n".join(rows) + "\n")
    assert module.steps_to_475(episodes) == 49_500.0  # at the 100th episode: (10 + 99 x 500) / 100 >= 475
    episodes.write_text("env_step,episode,length,return\n" + "\n".join(rows[:99]) + "\n")
    assert module.steps_to_475(episodes) is None  # fewer than 100 episodes never count

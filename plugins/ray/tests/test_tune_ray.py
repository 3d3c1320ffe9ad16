"""`rlf tune --launcher ray`: a study's workers as Ray tasks on a private local Ray complete the study as
local worker processes do, bad input is one line before any trial, and the registry lists the launcher."""

import os
import subprocess
import sys
from pathlib import Path

import optuna

from rlf.plugins import load_registry

RLF = str(Path(sys.executable).parent / "rlf")

# random's only setting, and the env's time limit: 5 steps make short episodes, a clearly worse trial
SPACE = """
[algo.seed_offset]
type = "int"
low = 0
high = 5

[env.max_episode_steps]
type = "categorical"
choices = [5, 50]
"""


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    """The command's result, with its own pid as ``.pid``."""
    environment = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RLF_LOAD_PLUGINS")}
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**environment, **env}) as process:
        try:
            out, err = process.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    done = subprocess.CompletedProcess(args, process.returncode, out, err)
    done.pid = process.pid
    return done


def tune(tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    return run(RLF, "tune", "random", "--env", "gym:CartPole-v1", "--space", str(space), "--steps", "200",
               "--set", "num_envs=2", "--set", "eval_episodes=2", "--set", 'loggers=["csv"]', "--pruner", "none",
               "--sampler", "random", "--sampler-seed", "0", "--study-dir", str(tmp_path / "study"), *extra, **env)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("rlf: error:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_study_runs_its_workers_as_tasks_on_a_local_ray(tmp_path):
    done = tune(tmp_path, "--trials", "3", "--jobs", "2", "--launcher", "ray", "--address", "local")
    assert done.returncode == 0, done.stderr
    storage = f"sqlite:///{(tmp_path / 'study' / 'study.db').resolve()}"
    stored = optuna.load_study(study_name="random-gym-CartPole-v1", storage=storage).trials
    # two workers that finish together may both start a trial past --trials: it ends at once, unrun and unlisted
    surplus = [t for t in stored if t.user_attrs.get("surplus")]
    assert all(t.state.name == "FAIL" and not t.params for t in surplus)
    trials = [t for t in stored if t not in surplus]
    assert len(trials) == 3 and all(t.state.name == "COMPLETE" for t in trials)
    assert done.pid not in {t.user_attrs["pid"] for t in trials}  # in Ray's worker processes, not rlf tune's
    for trial in trials:
        assert (tmp_path / "study" / f"trial-{trial.number}-seed0" / "eval.csv").is_file()
    assert (tmp_path / "study" / "best.toml").is_file()
    out = done.stdout.splitlines()
    assert any("2 worker(s) on launcher ray (local)" in line for line in out), done.stdout
    # one progress line per trial, as local workers print them, then the table with every trial
    assert sorted(line.split()[1] for line in out if line.startswith("trial ") and "complete" in line) == ["0", "1", "2"]
    header = out.index(next(line for line in out if line.startswith("trial") and "state" in line))
    assert sorted(line.split()[0] for line in out[header + 1:header + 4]) == ["0", "1", "2"]
    assert "3 complete, 0 pruned, 0 failed" in done.stdout


def test_bad_input_is_one_line_before_any_trial_and_without_ray(tmp_path):
    line = one_line_error(tune(tmp_path, "--launcher", "rey"))
    assert "unknown launcher 'rey'" in line and "did you mean 'ray'?" in line and "installed: processes, ray" in line
    line = one_line_error(tune(tmp_path, "--launcher", "ray", RLF_LOAD_PLUGINS="random"))
    assert "unknown launcher 'ray'" in line and "installed: processes;" in line and "RLF_LOAD_PLUGINS" in line
    # a remote cluster cannot see this machine's SQLite file: refused before Ray is asked (nothing listens there)
    for extra, env in ((("--address", "127.0.0.1:9"), {}), ((), {"RAY_ADDRESS": "ray://127.0.0.1:9"})):
        line = one_line_error(tune(tmp_path, "--jobs", "2", "--launcher", "ray", *extra, **env))
        assert "is a SQLite file that only this machine sees" in line and "pass --storage" in line, line
        assert "postgresql://" in line
    line = one_line_error(tune(tmp_path, "--launcher", "ray", "--address", "no/such"))
    assert "--address 'no/such' must be local, auto, ray://HOST:10001 or HOST:PORT" in line
    line = one_line_error(tune(tmp_path, "--address", "local"))
    assert "add --launcher ray" in line
    assert not (tmp_path / "study").exists()


def test_the_registry_lists_the_launcher():
    registry = load_registry()
    spec = registry.launchers["ray"]
    assert spec.plugin == "ray" and "ray" in registry.plugins["ray"].launchers
    assert registry.launcher("ray") is spec and registry.launcher("processes") is None
    assert "rlf_register_tune_launchers" in registry.plugins["ray"].hooks
    listed = run(RLF, "list")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:2] == ["ray", "ray"] for line in
               listed.stdout.split("tune launchers")[1].splitlines()[1:]), listed.stdout

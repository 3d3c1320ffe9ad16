"""The user's install, exactly: in a fresh virtual environment,

    pip install --find-links WHEELHOUSE -c constraints.txt rlf-plugin-icm

brings rlf, rlf-plugin-ppo and rlf-plugin-icm and no other rlf plugin, and
``rlf train icm --env gym:CartPole-v1 --steps 512`` works. Also: the wheelhouse holds a wheel of the
core and of every plugin directory, torch is the CPU build, and no CUDA wheel slipped in.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    path = Path(os.environ.get("RLF_WHEELHOUSE", ROOT / "wheelhouse"))
    assert list(path.glob("rlf-*.whl")), f"no wheelhouse at {path}: run scripts/build_wheels.sh first"
    return path


def wheel_names(wheelhouse: Path) -> set[str]:
    return {re.sub(r"[-_.]+", "-", w.name.split("-")[0]).lower() for w in wheelhouse.glob("*.whl")}


def test_wheelhouse_has_the_core_every_plugin_and_only_cpu_torch(wheelhouse: Path):
    names = wheel_names(wheelhouse)
    missing = [p for p in ["rlf", *(f"rlf-plugin-{d.replace('_', '-')}" for d in PLUGINS)] if p not in names]
    assert not missing, f"no wheel for {missing} in {wheelhouse}"
    torch = [w.name for w in wheelhouse.glob("torch-*.whl")]
    assert torch and all(name.startswith("torch-2.13.0+cpu-") for name in torch), torch
    assert not [n for n in names if n.startswith("nvidia-")], "CUDA wheels in the wheelhouse"


@pytest.fixture(scope="module")
def icm_venv(tmp_path_factory, wheelhouse: Path) -> Path:
    assert "icm" in PLUGINS, "plugins/icm is missing; the wheelhouse test installs rlf-plugin-icm"
    home = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(home, with_pip=True)
    python = home / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", "--find-links", str(wheelhouse),
                                "-c", str(ROOT / "constraints.txt"), "rlf-plugin-icm"],
                               capture_output=True, text=True, timeout=1200)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return home


def test_pip_install_icm_brings_exactly_rlf_ppo_and_icm(icm_venv: Path):
    listing = subprocess.run(
        [str(icm_venv / "bin" / "python"), "-c",
         "import importlib.metadata as m, json; print(json.dumps({d.metadata['Name']: d.version "
         "for d in m.distributions()}))"],
        capture_output=True, text=True, check=True)
    installed = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in json.loads(listing.stdout).items()}
    ours = {name for name in installed if name == "rlf" or name.startswith("rlf-plugin-")}
    assert ours == {"rlf", "rlf-plugin-ppo", "rlf-plugin-icm"}, ours
    assert installed["torch"] == "2.13.0+cpu", installed.get("torch")


def test_rlf_train_icm_on_cartpole_works(icm_venv: Path, tmp_path: Path):
    trained = subprocess.run([str(icm_venv / "bin" / "rlf"), "train", "icm", "--env", "gym:CartPole-v1",
                              "--steps", "512"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=900,
                             env={**os.environ, "PYTHONPATH": ""})
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "training icm on gym:CartPole-v1" in trained.stderr
    assert any(line.startswith("done: ") for line in trained.stdout.splitlines()), trained.stdout
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and (runs[0] / "checkpoint.rlf").is_file(), runs
    evaluated = subprocess.run([str(icm_venv / "bin" / "rlf"), "eval", str(runs[0]), "--episodes", "2"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert "return" in evaluated.stdout


def test_the_wheels_carry_the_presets_rlf_train_uses(icm_venv: Path, tmp_path: Path):
    """Presets are package data: a wheel built without them would leave `rlf train ppo` on the plain defaults."""
    shown = subprocess.run([str(icm_venv / "bin" / "rlf"), "config", "ppo", "--env", "gym:CartPole-v1"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": ""})
    assert shown.returncode == 0, shown.stderr
    assert "preset: rlf_plugin_ppo/presets/cartpole.toml" in shown.stderr, shown.stderr
    assert any(line.startswith("rollout_steps = 32  #") for line in shown.stdout.splitlines())
    listed = subprocess.run([str(icm_venv / "bin" / "rlf"), "list"], cwd=tmp_path, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "PYTHONPATH": ""}).stdout
    ppo = next(line for line in listed.splitlines() if line.split()[:1] == ["ppo"])
    assert ("presets: gym:CartPole-v1, gym:HalfCheetah-v5, gym:Hopper-v5, gym:Pendulum-v1, gym:Walker2d-v5, "
            "gym:rlf.envs.cartpole_positions:CartPolePositions-v1, mario") in ppo
    assert "presets: mario" in listed, listed

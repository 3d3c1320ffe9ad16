"""The docs' tutorial plugin (docs/tutorial/rlf-plugin-reinforce, shown whole in docs/tutorial.md) installs
with pip, is found through its entry point, and passes its own tests, which train it on CartPole."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from support import ROOT, child_env, pip_install

TUTORIAL = ROOT / "docs" / "tutorial" / "rlf-plugin-reinforce"


def test_tutorial_plugin_installs_learns_and_resumes(tmp_path: Path):
    python = child_env(tmp_path / "venv")
    # a copy: pip's in-tree build would leave build/ and *.egg-info in the docs
    source = shutil.copytree(TUTORIAL, tmp_path / "rlf-plugin-reinforce",
                             ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip_install(python, source)
    env = {**os.environ, "PYTHONPATH": "", "OMP_NUM_THREADS": "1"}
    listing = subprocess.run([str(python), "-m", "rlf.cli.commands", "list"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert listing.returncode == 0 and "reinforce" in listing.stdout, listing.stdout + listing.stderr
    tested = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests")],
                            cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert "2 passed" in tested.stdout, tested.stdout


def test_the_tutorial_refuses_spaces_it_cannot_read_with_the_one_line_error(monkeypatch):
    # the core env has no torch, which the tutorial's network needs: checked here, beside every plugin
    import importlib
    import sys
    from pathlib import Path

    import pytest
    from gymnasium import spaces

    from rlf import IncompatibleError

    root = Path(__file__).resolve().parents[2]
    monkeypatch.syspath_prepend(str(root / "docs" / "tutorial" / "rlf-plugin-reinforce" / "src"))
    sys.modules.pop("rlf_plugin_reinforce", None)
    sys.modules.pop("rlf_plugin_reinforce.factory", None)
    tutorial = importlib.import_module("rlf_plugin_reinforce.factory")
    with pytest.raises(IncompatibleError, match="discrete actions"):
        tutorial.policy_network(spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (1,)), 8)
    with pytest.raises(IncompatibleError, match="Box observations"):
        tutorial.policy_network(spaces.Discrete(4), spaces.Discrete(2), 8)

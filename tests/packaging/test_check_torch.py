"""scripts/check_torch.py: tells a CUDA torch build from the others by its metadata, before any download,
and passes the CPU build this project's pip is configured to find."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_torch", ROOT / "scripts" / "check_torch.py")
check_torch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_torch)


def item(version: str, requires: list[str]) -> dict:
    return {"metadata": {"name": "torch", "version": version, "requires_dist": requires},
            "download_info": {"url": f"https://example.invalid/torch-{version}-cp311-cp311-linux_x86_64.whl"}}


def test_cuda_builds_are_told_by_version_tag_or_nvidia_requirements():
    assert check_torch.is_cuda(item("2.13.0+cu128", []))
    assert check_torch.is_cuda(item("2.13.0", ["filelock", 'nvidia-cublas-cu12==12.8.4.1; platform_system == "Linux"']))
    assert not check_torch.is_cuda(item("2.13.0+cpu", ["filelock", "sympy>=1.13.3"]))
    assert not check_torch.is_cuda(item("2.13.0", ["filelock"]))  # macOS / Windows wheels on PyPI


def test_this_machines_pip_resolves_a_cpu_build():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_torch.py"), "-c", str(ROOT / "constraints.txt")],
                          capture_output=True, text=True, timeout=300,
                          env={k: v for k, v in os.environ.items() if k != "RLF_ALLOW_CUDA_TORCH"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("torch 2.13.0") and "+cu" not in done.stdout

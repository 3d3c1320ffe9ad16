"""Which torch would pip install here, and is it a CUDA build? (stdlib only; runs before any download)

    python scripts/check_torch.py [PIP OPTIONS...]      e.g. -c constraints.txt --find-links wheelhouse

Resolves torch exactly as ``pip install`` would with the given options and the user's pip configuration
(pip.conf, PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS), reading only the wheel's metadata
(``pip install --dry-run --report``), and prints the resolved version and file. Exits 1 with one line
when that is a CUDA build (a ``+cu`` version, or ``nvidia-*`` requirements, as PyPI's default Linux
wheel has) unless RLF_ALLOW_CUDA_TORCH=1: such a build weighs several GB, and the CPU images and
wheelhouses here do not want one by accident. Any build elsewhere (CPU, macOS, Windows) passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def resolve(pip_args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
                               "--quiet", "--disable-pip-version-check", "--report", str(report), *pip_args,
                               "torch"], capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            sys.exit(f"check_torch: pip cannot resolve torch with {' '.join(pip_args) or 'no options'}: {tail}")
        install = json.loads(report.read_text())["install"]
    return next(item for item in install if item["metadata"]["name"].lower() == "torch")


def is_cuda(item: dict) -> bool:
    version = item["metadata"]["version"]
    requires = item["metadata"].get("requires_dist") or []
    return "+cu" in version or any(req.lower().startswith("nvidia-") for req in requires)


def main(argv: list[str]) -> int:
    item = resolve(argv)
    url = item["download_info"]["url"]
    version = item["metadata"]["version"]
    if is_cuda(item) and os.environ.get("RLF_ALLOW_CUDA_TORCH") != "1":
        print(f"check_torch: pip would install the CUDA build torch {version} ({url.rsplit('/', 1)[-1]}, several GB). "
              f"For the CPU build point pip at the PyTorch CPU index (PIP_EXTRA_INDEX_URL={CPU_INDEX}); "
              "to take the CUDA build on purpose set RLF_ALLOW_CUDA_TORCH=1", file=sys.stderr)
        return 1
    print(f"torch {version} from {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

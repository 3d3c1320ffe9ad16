"""A pytest plugin that scripts/tox_env.py loads into every env of the matrix: a test that leaves a run
directory in the repository fails, naming what it left.

Run directories made by tests belong in their tmp_path. The usual way one escapes is the public default:
a run without ``run_dir`` (``rlf.make`` or ``rlf.load`` of a checkpoint *file*) writes to
./runs/<algorithm>-<env>-<time>, and pytest runs from the repository root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# tox_env.py starts pytest in the repository root; a test that chdirs elsewhere is not watched there
ROOT = Path.cwd()
WATCHED = ("runs",)


def _present() -> set[Path]:
    return {entry for name in WATCHED if (ROOT / name).is_dir() for entry in (ROOT / name).iterdir()}


@pytest.fixture(autouse=True)
def _rlf_no_run_directories_in_the_repository():
    before = _present()
    yield
    left = sorted(_present() - before)
    if left:
        names = ", ".join(str(path.relative_to(ROOT)) for path in left)
        pytest.fail(f"this test left {names} in the repository (or a test of another tox env running at the same "
                    "time did); give each run a run_dir under tmp_path: a run without one, and rlf.load of a "
                    "checkpoint file, write to ./runs", pytrace=False)

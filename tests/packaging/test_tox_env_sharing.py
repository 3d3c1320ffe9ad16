"""scripts/tox_env.py's sharing of installed files between tox envs: identical files (by the hash pip
recorded, then by their bytes) become hard links to one copy, anything else keeps its own copy."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_tox_env():
    spec = importlib.util.spec_from_file_location("tox_env_under_test", ROOT / "scripts" / "tox_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def install(site: Path, files: dict[str, bytes], recorded: dict[str, bytes] | None = None) -> None:
    """A distribution `heavy` as pip leaves it: the files, and a RECORD with each one's hash and size
    (``recorded`` overrides the bytes a RECORD line was computed from, as for a file changed after install)."""
    info = site / "heavy-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: heavy\nVersion: 1.0\n")
    lines = []
    for name, data in files.items():
        path = site / "heavy" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        basis = (recorded or {}).get(name, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(basis).digest()).rstrip(b"=").decode()
        lines.append(f"heavy/{name},sha256={digest},{len(basis)}")
    lines.append("heavy-1.0.dist-info/RECORD,,")
    (info / "RECORD").write_text("\n".join(lines) + "\n")


def test_identical_files_become_one_copy_and_different_or_small_ones_stay_apart(tmp_path):
    tox_env = load_tox_env()
    big, other, small = b"w" * 200_000, b"v" * 200_000, b"s" * 100
    first, second, store = tmp_path / "env1", tmp_path / "env2", tmp_path / "store"
    install(first, {"weights.bin": big, "tiny.py": small, "lib.so": other})
    # env2's lib.so claims env1's content in its RECORD but its bytes differ: it must not be linked
    install(second, {"weights.bin": big, "tiny.py": small, "lib.so": b"x" * 200_000}, recorded={"lib.so": other})

    assert tox_env.share_identical_files(first, store) == 0  # the first env only fills the store
    assert tox_env.share_identical_files(second, store) == len(big)
    assert tox_env.share_identical_files(second, store) == 0  # a second pass finds nothing left to share

    def inode(env: Path, name: str) -> int:
        return (env / "heavy" / name).stat().st_ino

    assert inode(first, "weights.bin") == inode(second, "weights.bin")
    assert (second / "heavy" / "weights.bin").read_bytes() == big
    assert inode(first, "lib.so") != inode(second, "lib.so")
    assert (second / "heavy" / "lib.so").read_bytes() == b"x" * 200_000
    assert inode(first, "tiny.py") != inode(second, "tiny.py")  # under SHARED_MIN_BYTES
    assert not list((second / "heavy").glob("*.tox-env-link"))


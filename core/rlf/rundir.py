"""Run directories are owned: validated before use, locked for the life of a run, never silently reused.

The lock is an OS-level file lock (``filelock``, flock on POSIX) on ``<run dir>/.rlf.lock``: the kernel
drops it when the process dies, even on ``kill -9``, so a crashed run never leaves a stale lock, and
filelock (4.x) closes the descriptor in forked children, so an actor process outliving its killed
parent does not keep it either. Who
holds it is written to ``.rlf-owner.json`` after acquiring, because the lock file itself is truncated
by every process that tries to take it.
"""

from __future__ import annotations

import csv
import errno
import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

from .errors import RunDirError

LOCK_FILE = ".rlf.lock"
OWNER_FILE = ".rlf-owner.json"
# What makes a directory "hold a run", and what --overwrite removes (never anything else).
RUN_FILES = ("run.json", "checkpoint.rlf", "metrics.csv", "episodes.csv")
# Also written by a run (periodic evaluation), removed by --overwrite and cut back on resume.
EXTRA_FILES = ("eval.csv", "best.rlf", "best.json")
HISTORY_FILES = ("metrics.csv", "episodes.csv", "eval.csv")
CHECKPOINT_GLOB = "checkpoint*.rlf"
STALE_TMP_GLOBS = (".checkpoint*.rlf.*.tmp", ".run.json.*.tmp", "*.csv.tmp", f".{OWNER_FILE}.*.tmp")


def validate(path: Path | str | None, *, what: str = "run directory") -> Path:
    """The run directory as a Path, or one RunDirError line saying what is wrong with it."""
    if path is None or not str(path).strip():
        raise RunDirError(f"the {what} is empty; pass a directory name, e.g. --run-dir runs/my-run")
    path = Path(path)
    name_max = _name_max(path)
    for part in path.parts:
        if len(os.fsencode(part)) > name_max:
            raise RunDirError(f"{what} {str(path)[:80]}...: the name {part[:40]}... is longer than this "
                              f"filesystem allows ({name_max} bytes); choose a shorter --run-dir")
    if len(os.fsencode(str(path.absolute()))) >= 4096:
        raise RunDirError(f"{what} {str(path)[:80]}... is longer than paths may be (4096 bytes); "
                          "choose a shorter --run-dir")
    if path.exists() and not path.is_dir():
        raise RunDirError(f"{what} {path} is a file, not a directory; choose another --run-dir")
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise RunDirError(f"{what} {path} cannot be created: {existing} is a file; choose another --run-dir")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        why = ("is on a read-only filesystem" if os.statvfs(existing).f_flag & os.ST_RDONLY
               else "does not allow writing")
        raise RunDirError(f"{what} {path} is not writable ({existing} {why}); "
                          "choose another --run-dir or fix its permissions")
    return path


def _name_max(path: Path) -> int:
    probe = next((p for p in (path, *path.parents) if _exists(p) and p.is_dir()), Path("."))
    try:
        return os.pathconf(probe, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # e.g. ENAMETOOLONG: it cannot exist either
        return False


def holds_run(path: Path) -> bool:
    return path.is_dir() and any((path / name).exists() for name in RUN_FILES)


class RunDirLock:
    """Exclusive ownership of a run directory; ``acquire`` refuses with a line naming the holder."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self._lock = None

    def acquire(self) -> RunDirLock:
        from filelock import FileLock, Timeout

        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirError(f"cannot create run directory {self.run_dir} ({exc.strerror}); "
                              "choose another --run-dir") from None
        lock = FileLock(self.run_dir / LOCK_FILE, timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise RunDirError(f"run directory {self.run_dir} is in use by {describe_owner(self.run_dir)}; "
                              "wait for it to finish, stop it, or choose another --run-dir") from None
        except OSError as exc:
            raise RunDirError(f"cannot lock run directory {self.run_dir} ({exc.strerror}); "
                              "choose a directory on a local, writable filesystem") from None
        self._lock = lock
        try:
            owner = {"pid": os.getpid(), "host": socket.gethostname(),
                     "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
            _write_atomic(self.run_dir / OWNER_FILE, json.dumps(owner).encode())
            clean_stale_tmp(self.run_dir)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> RunDirLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def describe_owner(run_dir: Path) -> str:
    try:
        owner = json.loads((Path(run_dir) / OWNER_FILE).read_text())
        return f"pid {owner['pid']} on {owner['host']} (started {owner['started']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (its owner record is unreadable)"


def clean_stale_tmp(run_dir: Path) -> list[Path]:
    """Temporary files of writes that a kill interrupted; only called while holding the lock."""
    removed = []
    for pattern in STALE_TMP_GLOBS:
        for path in Path(run_dir).glob(pattern):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def remove_run(run_dir: Path) -> None:
    """What --overwrite does: remove the files rlf wrote, keep anything else the user put there."""
    for name in (*RUN_FILES, *EXTRA_FILES):
        (run_dir / name).unlink(missing_ok=True)
    for path in run_dir.glob(CHECKPOINT_GLOB):
        path.unlink(missing_ok=True)
    shutil.rmtree(run_dir / "tensorboard", ignore_errors=True)


def refuse_existing_run(run_dir: Path) -> None:
    if holds_run(run_dir):
        raise RunDirError(f"run directory {run_dir} already holds a run; continue it with "
                          f"`rlf train --resume {run_dir}`, replace it with --overwrite, or choose another --run-dir")


# -- history ------------------------------------------------------------------------------------


def truncate_history(run_dir: Path, env_step: int, names: tuple[str, ...] = HISTORY_FILES) -> None:
    """Cut each CSV back to the rows logged at or before ``env_step`` (the checkpoint's), atomically.

    Rows after the checkpoint were logged by a run that was killed before its next checkpoint; a
    resume repeats those steps, so keeping them would make env_step go backwards and episodes repeat.
    A row cut short by a kill is dropped too.
    """
    for name in names:
        path = Path(run_dir) / name
        if not path.is_file() or not path.stat().st_size:
            continue
        with path.open(newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            rows = list(reader)
        if "env_step" not in header:
            continue
        index = header.index("env_step")
        kept = [row for row in rows if len(row) == len(header) and _step(row[index]) is not None
                and _step(row[index]) <= env_step]
        if len(kept) == len(rows):
            continue
        tmp = path.with_name(f"{path.name}.tmp")
        with tmp.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(header)
            writer.writerows(kept)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)


def _step(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


# -- disk errors ----------------------------------------------------------------------------------

_ELSEWHERE = "or choose another --run-dir"
FS_FIXES = {
    errno.ENOSPC: f"free some space {_ELSEWHERE}", errno.EDQUOT: f"free some space {_ELSEWHERE}",
    errno.EROFS: f"make it writable {_ELSEWHERE}", errno.EIO: f"check the disk {_ELSEWHERE}",
    errno.EACCES: "fix the permissions or choose another path",
    errno.EPERM: "fix the permissions or choose another path",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.ENOTDIR: "a file is in the way of a directory there: move it or choose another path",
    errno.EEXIST: "a file is in the way of a directory there: move it or choose another path",
    errno.EISDIR: "a directory is where a file is expected: pass a file",
}
"""Filesystem errors a user can fix, and how: one table for run-directory writes and the CLI's last resort."""
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})
"""The ones that mean the disk under a run, rather than a path the user gave, went wrong."""


def os_error_line(exc: OSError) -> str | None:
    """A user-fixable filesystem error as one line (None: not one we can explain)."""
    if exc.errno not in FS_FIXES:
        return None
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{exc.strerror or exc}{where}; {FS_FIXES[exc.errno]}"


def disk_error(exc: OSError, run_dir: Path, step: int | None) -> RunDirError | None:
    """A user-fixable OSError writing the run as one line (None: not one we can explain)."""
    if exc.errno not in DISK_ERRNOS:
        return None
    fix = FS_FIXES[exc.errno]
    kept = (f"; the last checkpoint is kept: continue with `rlf train --resume {run_dir}`"
            if (Path(run_dir) / "checkpoint.rlf").is_file() else "")
    where = f" at env step {step}" if step else ""
    name = f" ({exc.filename})" if exc.filename else ""
    return RunDirError(f"cannot write run directory {run_dir}{where}: {exc.strerror or os.strerror(exc.errno)}"
                       f"{name}; {fix}{kept}")


def _write_atomic(path: Path, data: bytes) -> None:
    from .checkpoint import atomic_write

    atomic_write(path, lambda handle: handle.write(data))

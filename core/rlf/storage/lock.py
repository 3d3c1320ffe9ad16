"""One writer per run directory: an exclusive lock, and who holds it when a second process is refused.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from rlf.errors import RunDirError
from rlf.storage.files import HELD_MANIFESTS, LOCK_FILE, OWNER_FILE, Manifest, check_links, write_bytes_atomic
from rlf.storage.rundir import clean_stale_tmp


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
        check_links(self.run_dir)  # before the lock file is opened: it may be one of them
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
            write_bytes_atomic(self.run_dir / OWNER_FILE, json.dumps(owner).encode())
            book = Manifest(self.run_dir)
            book.save()  # a run from before the manifest gets one, of the files rlf's names say are its own
            HELD_MANIFESTS[os.path.abspath(self.run_dir)] = book
            clean_stale_tmp(self.run_dir)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        if self._lock is not None:
            HELD_MANIFESTS.pop(os.path.abspath(self.run_dir), None)
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

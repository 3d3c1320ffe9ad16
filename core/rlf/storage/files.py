"""The files rlf writes in a run directory, and only those: their names, the ownership manifest, writes
that never follow a link out of the directory, atomic replacement, and one-line errors for a full or
read-only disk.
"""

from __future__ import annotations

import errno
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from rlf.errors import RunDirError

LOCK_FILE = ".rlf.lock"
OWNER_FILE = ".rlf-owner.json"
MANIFEST_FILE = ".rlf-files.json"
"""Every file rlf wrote in the run directory, recorded before it is created: what --overwrite,
checkpoint rotation and stale-temp cleanup may delete (nothing else)."""
INTERNAL_FILES = (LOCK_FILE, OWNER_FILE, MANIFEST_FILE)
# The files of a run; it "holds a run" once it has a checkpoint or data rows (see holds_run).
RUN_FILES = ("run.json", "checkpoint.rlf", "metrics.csv", "episodes.csv")
# Also written by a run (periodic evaluation), and cut back on resume.
EXTRA_FILES = ("eval.csv", "best.rlf", "best.json")
HISTORY_FILES = ("metrics.csv", "episodes.csv", "eval.csv")
# Written by `rlf experiment` into each of its runs.
EXPERIMENT_FILES = ("experiment.json", "final_eval.csv", "final_eval_stochastic.csv")
TENSORBOARD_DIR = "tensorboard"
KEPT_CHECKPOINT = re.compile(r"checkpoint-\d+\.rlf")
"""The older checkpoints a run keeps (``run.keep_checkpoints``): checkpoint-1.rlf, checkpoint-2.rlf, ..."""
_EVENT_FILE = re.compile(r"events\.out\.tfevents\..+")


def rlf_name(name: str) -> bool:
    """A name rlf writes in a run directory: a file of that name that rlf did not write is in the way."""
    return (name in (*RUN_FILES, *EXTRA_FILES, *EXPERIMENT_FILES, TENSORBOARD_DIR)
            or bool(KEPT_CHECKPOINT.fullmatch(name)))



HELD_MANIFESTS: dict[str, Manifest] = {}
"""The manifests of the run directories this process holds the lock of (by absolute path)."""


class Manifest:
    """The names (relative to the run directory) of the files rlf wrote there, kept on disk."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.files, self.kept = _read_manifest(self.run_dir)
        """``kept``: the user's files found when the run started; never rlf's, whatever their names."""

    def add(self, name: str) -> None:
        """Record ``name`` before it is created: a kill in between leaves a name without a file, never
        a file rlf wrote that it would not recognise."""
        if name not in self.files:
            self.files.add(name)
            self.save()

    def discard(self, names: set[str]) -> None:
        if names & self.files:
            self.files -= names
            self.save()

    def keep(self, names: list[str]) -> None:
        if set(names) - self.kept:
            self.kept |= set(names)
            self.save()

    def save(self) -> None:
        data = {"format": "rlf-files", "files": sorted(self.files), "kept": sorted(self.kept)}
        write_bytes_atomic(self.run_dir / MANIFEST_FILE, json.dumps(data, indent=0).encode())


def _read_manifest(run_dir: Path) -> tuple[set[str], set[str]]:
    try:
        data = json.loads((run_dir / MANIFEST_FILE).read_bytes())
        files, kept = (data["files"], data.get("kept", [])) if data.get("format") == "rlf-files" else (None, None)
    except FileNotFoundError:
        return _legacy_files(run_dir), set()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        files = kept = None
    if not isinstance(files, list) or not isinstance(kept, list):
        raise RunDirError(f"run directory {run_dir}: its record of rlf's files ({MANIFEST_FILE}) is unreadable; "
                          "move the files you want to keep elsewhere and choose another --run-dir")
    return ({name for name in files if isinstance(name, str) and _inside_name(name)},
            {name for name in kept if isinstance(name, str)})


def _inside_name(name: str) -> bool:
    """A recorded name may only be a file in the run directory or in its tensorboard/ (never ``..``)."""
    parts = name.split("/")
    return (len(parts) == 1 and parts[0] not in ("", ".", "..")) or (
        len(parts) == 2 and parts[0] == TENSORBOARD_DIR and parts[1] not in ("", ".", ".."))


def _legacy_files(run_dir: Path) -> set[str]:
    """A run written before rlf kept its manifest: rlf's own names in it are rlf's files."""
    try:
        is_run = json.loads((run_dir / "run.json").read_bytes()).get("format") == "rlf-run"
    except (OSError, ValueError, AttributeError):
        is_run = False
    if not is_run:
        return set()
    names = {entry.name for entry in dir_entries(run_dir) if rlf_name(entry.name) and entry.name != TENSORBOARD_DIR}
    board = run_dir / TENSORBOARD_DIR
    if board.is_dir() and not board.is_symlink():
        names |= {f"{TENSORBOARD_DIR}/{entry.name}" for entry in dir_entries(board) if _EVENT_FILE.fullmatch(entry.name)}
    return names


def dir_entries(directory: Path) -> list[os.DirEntry]:
    """A directory's entries, none when it is gone (a run directory removed under a reader)."""
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


def manifest(run_dir: Path) -> Manifest:
    """The held run directory's manifest, or (not held: `rlf experiment` writing beside a run) a fresh read."""
    return HELD_MANIFESTS.get(os.path.abspath(run_dir)) or Manifest(Path(run_dir))


def owned_files(run_dir: Path) -> set[str]:
    book = manifest(run_dir)
    return book.files - book.kept


def claim(run_dir: Path, name: str) -> Path:
    """The path of ``name`` in the run directory, recorded as rlf's, after checking that writing it cannot
    leave the run directory (no symlink on the way) and does not replace a file rlf did not write."""
    run_dir = Path(run_dir)
    path = run_dir / name
    book = manifest(run_dir)
    if name not in book.files and _exists_nofollow(path):
        raise RunDirError(f"run directory {run_dir} holds {name}, which rlf did not write and would replace; "
                          "move or rename it, or choose another --run-dir")
    _refuse_links_on_the_way(run_dir, name)
    book.add(name)
    return path


def _exists_nofollow(path: Path) -> bool:
    try:
        os.lstat(path)
        return True
    except FileNotFoundError:
        return False


def _refuse_links_on_the_way(run_dir: Path, name: str) -> None:
    current = Path(run_dir)
    for part in name.split("/"):
        current = current / part
        if current.is_symlink():
            raise _link_error(run_dir, [current.name])


def _link_error(run_dir: Path, names: list[str]) -> RunDirError:
    shown = ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return RunDirError(f"run directory {run_dir} holds symbolic link(s) {shown} that rlf would write through "
                       "or that point outside it; rlf writes only inside its run directory and never through "
                       "links: remove the link(s) or choose another --run-dir")


def open_for_write(run_dir: Path, name: str, mode: str = "a", newline: str | None = ""):
    """Open ``name`` in the run directory for appending (``a``) or writing (``w``), recorded as rlf's
    and never through a symlink (O_NOFOLLOW: a link planted after the start check is refused too)."""
    path = claim(run_dir, name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if mode == "a" else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_error(Path(run_dir), [name]) from None
        raise
    return os.fdopen(fd, mode, newline=newline)


class TensorBoardFiles:
    """The run's ``tensorboard/`` directory for an event-file writer (tensorboardX opens its files
    itself): a real directory, never a link; the files the writer creates are recorded as rlf's."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.directory = self.run_dir / TENSORBOARD_DIR
        _refuse_links_on_the_way(self.run_dir, TENSORBOARD_DIR)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._before = {entry.name for entry in dir_entries(self.directory)}
        # a random part in the writer's file name: a link planted in advance cannot match it. Readers
        # (TensorBoard) take a directory's event files in name order, and the name's own time is in whole
        # seconds: the nanosecond clock first keeps a resume started within the same second after the
        # run it continues, so its purge of the steps after the checkpoint applies to the right file
        self.suffix = f".{time.time_ns():020d}{os.urandom(4).hex()}"

    def record(self) -> None:
        book = manifest(self.run_dir)
        for entry in dir_entries(self.directory):
            if entry.name not in self._before and entry.name.endswith(self.suffix):
                book.add(f"{TENSORBOARD_DIR}/{entry.name}")


def check_links(run_dir: Path) -> None:
    """Refuse a run directory holding a symlink at a name rlf writes, or one pointing outside it."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return
    root = os.path.realpath(run_dir)
    bad = []
    board = run_dir / TENSORBOARD_DIR
    entries = dir_entries(run_dir) + (dir_entries(board) if board.is_dir() and not board.is_symlink() else [])
    for entry in entries:
        if not entry.is_symlink():
            continue
        target = os.path.realpath(entry.path)
        inside = os.path.commonpath([root, target]) == root
        ours = entry.name in INTERNAL_FILES or rlf_name(entry.name) or Path(entry.path).parent.name == TENSORBOARD_DIR
        if ours or not inside:
            bad.append(os.path.relpath(entry.path, run_dir))
    if bad:
        raise _link_error(run_dir, bad)
    # a hard link is another name for the same file, maybe outside the run directory: an append to it
    # writes there too. Names inside the directory are fine (checkpoint rotation links checkpoint.rlf to
    # checkpoint-1.rlf until the next write replaces the first by rename).
    stats = {entry.path: entry.stat(follow_symlinks=False) for entry in entries
             if not entry.is_symlink() and entry.is_file(follow_symlinks=False)}
    names_here = Counter((st.st_dev, st.st_ino) for st in stats.values())
    linked = [os.path.relpath(path, run_dir) for path, st in stats.items()
              if (Path(path).name in INTERNAL_FILES or rlf_name(Path(path).name)
                  or Path(path).parent.name == TENSORBOARD_DIR)
              and st.st_nlink > names_here[(st.st_dev, st.st_ino)]]
    if linked:
        shown = ", ".join(sorted(linked)[:5]) + (f" and {len(linked) - 5} more" if len(linked) > 5 else "")
        raise RunDirError(f"run directory {run_dir} holds {shown}, hard-linked to another name (st_nlink > 1) "
                          "that rlf would write through; replace it with a copy (cp --remove-destination) or "
                          "choose another --run-dir")


def foreign_files(run_dir: Path) -> list[str]:
    """Files in the run directory (and its tensorboard/) that rlf did not write."""
    owned = owned_files(run_dir) | set(INTERNAL_FILES)
    kept = manifest(run_dir).kept
    found = []
    for entry in dir_entries(run_dir):
        if entry.name == TENSORBOARD_DIR and entry.is_dir(follow_symlinks=False):
            found += [f"{TENSORBOARD_DIR}/{e.name}" for e in dir_entries(Path(entry.path))
                      if f"{TENSORBOARD_DIR}/{e.name}" not in owned]
        elif entry.name not in owned and (entry.name in kept or not owned_tmp_file(entry.name, owned)):
            found.append(entry.name)
    return sorted(found)


def is_event_file(name: str) -> bool:
    """A TensorBoard event file's name, as tensorboardX makes them."""
    return _EVENT_FILE.fullmatch(name) is not None


def is_own_tmp(name: str, owns: Callable[[str], bool]) -> bool:
    """``owned_tmp_file`` for a test of the name instead of a set (e.g. ``rlf_name``: any name rlf writes)."""
    if not name.endswith(".tmp"):
        return False
    base = name[:-4]
    if owns(base):
        return True
    stem, _, random = base[1:].rpartition(".") if base.startswith(".") else ("", "", "")
    return bool(stem) and owns(stem) and _MKSTEMP_TOKEN.fullmatch(random) is not None


def owned_tmp_file(name: str, owned: set[str]) -> bool:
    """A temporary file of a write to one of rlf's files: ``.<name>.<random>.tmp`` (atomic writes, the
    random part exactly as tempfile.mkstemp makes it: a user's ".metrics.csv.notes.tmp" is not rlf's) or
    ``<name>.tmp`` (CSV rewrites)."""
    return is_own_tmp(name, owned.__contains__)


_MKSTEMP_TOKEN = re.compile(r"[a-z0-9_]{8}")



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


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a temporary file and a rename: a reader never sees half of it."""
    from rlf.storage.checkpoint import atomic_write

    atomic_write(path, lambda handle: handle.write(data))

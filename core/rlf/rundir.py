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
import io
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

from .errors import RunDirError

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
_KEPT_CHECKPOINT = re.compile(r"checkpoint-\d+\.rlf")
_EVENT_FILE = re.compile(r"events\.out\.tfevents\..+")


def rlf_name(name: str) -> bool:
    """A name rlf writes in a run directory: a file of that name that rlf did not write is in the way."""
    return (name in (*RUN_FILES, *EXTRA_FILES, *EXPERIMENT_FILES, TENSORBOARD_DIR)
            or bool(_KEPT_CHECKPOINT.fullmatch(name)))


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
    """Whether ``path`` holds a run rlf wrote: a checkpoint, or rows of data (a user's own ``metrics.csv``
    does not make one). What a start that failed before both left (``run.json``, CSV headers) is rlf's
    debris, which a new run replaces: calling it a run sent the user from "use --resume" to "no
    checkpoint yet, use --overwrite"."""
    if not path.is_dir():
        return False
    owned = {name for name in owned_files(path) if (path / name).exists()}
    if any(name in ("checkpoint.rlf", "best.rlf") or _KEPT_CHECKPOINT.fullmatch(name) for name in owned):
        return True
    return any(_has_rows(path / name) for name in HISTORY_FILES if name in owned)


def holds_debris(path: Path) -> bool:
    """Whether ``path`` holds files rlf wrote but no run (see ``holds_run``)."""
    return path.is_dir() and not holds_run(path) and any((path / name).exists() for name in owned_files(path))


def _has_rows(path: Path) -> bool:
    try:
        with open(path, "rb") as file:
            file.readline()  # the header
            return any(line.strip() for line in file)
    except OSError:
        return True  # unreadable: it may hold data, so it is not rlf's to replace


# -- the manifest: which files in a run directory are rlf's ---------------------------------------

_held: dict[str, Manifest] = {}
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
        _write_atomic(self.run_dir / MANIFEST_FILE, json.dumps(data, indent=0).encode())


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
    names = {entry.name for entry in _entries(run_dir) if rlf_name(entry.name) and entry.name != TENSORBOARD_DIR}
    board = run_dir / TENSORBOARD_DIR
    if board.is_dir() and not board.is_symlink():
        names |= {f"{TENSORBOARD_DIR}/{entry.name}" for entry in _entries(board) if _EVENT_FILE.fullmatch(entry.name)}
    return names


def _entries(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except (FileNotFoundError, NotADirectoryError):
        return []


def manifest(run_dir: Path) -> Manifest:
    """The held run directory's manifest, or (not held: `rlf experiment` writing beside a run) a fresh read."""
    return _held.get(os.path.abspath(run_dir)) or Manifest(Path(run_dir))


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
        self._before = {entry.name for entry in _entries(self.directory)}
        # a random part in the writer's file name: a link planted in advance cannot match it
        self.suffix = f".{os.urandom(4).hex()}"

    def record(self) -> None:
        book = manifest(self.run_dir)
        for entry in _entries(self.directory):
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
    entries = _entries(run_dir) + (_entries(board) if board.is_dir() and not board.is_symlink() else [])
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


def foreign_files(run_dir: Path) -> list[str]:
    """Files in the run directory (and its tensorboard/) that rlf did not write."""
    owned = owned_files(run_dir) | set(INTERNAL_FILES)
    kept = manifest(run_dir).kept
    found = []
    for entry in _entries(run_dir):
        if entry.name == TENSORBOARD_DIR and entry.is_dir(follow_symlinks=False):
            found += [f"{TENSORBOARD_DIR}/{e.name}" for e in _entries(Path(entry.path))
                      if f"{TENSORBOARD_DIR}/{e.name}" not in owned]
        elif entry.name not in owned and (entry.name in kept or not _own_tmp(entry.name, owned)):
            found.append(entry.name)
    return sorted(found)


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
            _write_atomic(self.run_dir / OWNER_FILE, json.dumps(owner).encode())
            book = Manifest(self.run_dir)
            book.save()  # a run from before the manifest gets one, of the files rlf's names say are its own
            _held[os.path.abspath(self.run_dir)] = book
            clean_stale_tmp(self.run_dir)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        if self._lock is not None:
            _held.pop(os.path.abspath(self.run_dir), None)
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


def _own_tmp(name: str, owned: set[str]) -> bool:
    """A temporary file of a write to one of rlf's files: ``.<name>.<random>.tmp`` (atomic writes)
    or ``<name>.tmp`` (CSV rewrites)."""
    if name.endswith(".tmp"):
        base = name[:-4]
        if base in owned:
            return True
        if base.startswith("."):
            stem, _, _random = base[1:].rpartition(".")
            return stem in owned
    return False


def clean_stale_tmp(run_dir: Path) -> list[Path]:
    """Temporary files of writes to rlf's files that a kill interrupted; only called while holding the lock.
    A temporary file of any other name (``notes.csv.tmp``) is the user's, and kept."""
    owned = owned_files(run_dir) | set(INTERNAL_FILES)
    kept = manifest(run_dir).kept
    removed = []
    for entry in _entries(Path(run_dir)):
        if entry.name not in kept and _own_tmp(entry.name, owned) and entry.is_file(follow_symlinks=False):
            Path(entry.path).unlink(missing_ok=True)
            removed.append(Path(entry.path))
    return removed


def remove_run(run_dir: Path) -> None:
    """What --overwrite does: remove the files rlf wrote, keep anything else the user put there."""
    run_dir = Path(run_dir)
    book = manifest(run_dir)
    removed = set()
    for name in sorted(book.files):
        path = run_dir / name
        if os.path.islink(path) or path.is_file():
            path.unlink(missing_ok=True)
        removed.add(name)
    book.discard(removed)
    board = run_dir / TENSORBOARD_DIR
    if any(name.startswith(f"{TENSORBOARD_DIR}/") for name in removed) and board.is_dir() and not _entries(board):
        board.rmdir()  # only the directory rlf's event files were in, once empty


def refuse_existing_run(run_dir: Path) -> None:
    if holds_run(run_dir):
        raise RunDirError(f"run directory {run_dir} already holds a run; continue it with "
                          f"`rlf train --resume {run_dir}`, replace it with --overwrite, or choose another --run-dir")


def refuse_foreign(run_dir: Path, allowed: bool) -> None:
    """A new run in a directory holding files rlf did not write: refused unless ``allowed`` (--overwrite),
    and always where such a file has a name the run would write (rlf would replace it). Allowed, they
    are recorded as the user's (held directory only), so that no later cleanup takes one for rlf's."""
    found = foreign_files(run_dir)
    clashing = [name for name in found if rlf_name(name)]
    if clashing:
        raise RunDirError(f"run directory {run_dir} holds {_names(clashing)}, which rlf did not write but a run "
                          "would replace; move or rename them, or choose another --run-dir")
    if found and not allowed:
        raise RunDirError(f"run directory {run_dir} holds files rlf did not write ({_names(found)}); rlf never "
                          "deletes them: move them away, choose another --run-dir, or pass --overwrite to train "
                          "beside them (they are kept)")
    if found and os.path.abspath(run_dir) in _held:
        _held[os.path.abspath(run_dir)].keep(found)


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(name)[1:-1] for name in names[:5])  # repr: a newline in a name stays on the line
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


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
        rewrite_csv(path, header, kept)


def rewrite_csv(path: Path, header: list[str], rows: list[list[str]] | list[dict[str, Any]]) -> None:
    """Replace a CSV atomically (a new file renamed over it: never a write through a link at its name).
    ``rows`` are lists in header order or dicts (missing keys left empty)."""
    from .checkpoint import atomic_write

    def write(handle) -> None:
        text = io.TextIOWrapper(handle, newline="", write_through=True)
        csv.writer(text).writerow(header)
        if rows and isinstance(rows[0], dict):
            csv.DictWriter(text, fieldnames=header, restval="").writerows(rows)
        else:
            csv.writer(text).writerows(rows)
        text.flush()
        text.detach()  # the handle stays open for atomic_write's fsync

    atomic_write(path, write)


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

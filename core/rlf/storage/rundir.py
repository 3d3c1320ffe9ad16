"""Run directories: what makes a directory a run, refusing to train over one (or over files rlf did
not write), cutting the CSV logs back to a checkpoint on resume.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any

from rlf.errors import RunDirError
from rlf.storage.files import (
    HELD_MANIFESTS,
    HISTORY_FILES,
    INTERNAL_FILES,
    KEPT_CHECKPOINT,
    TENSORBOARD_DIR,
    dir_entries,
    foreign_files,
    manifest,
    owned_files,
    owned_tmp_file,
    rlf_name,
)


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
    if any(name in ("checkpoint.rlf", "best.rlf") or KEPT_CHECKPOINT.fullmatch(name) for name in owned):
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


def clean_stale_tmp(run_dir: Path) -> list[Path]:
    """Temporary files of writes to rlf's files that a kill interrupted; only called while holding the lock.
    A temporary file of any other name (``notes.csv.tmp``) is the user's, and kept."""
    owned = owned_files(run_dir) | set(INTERNAL_FILES)
    kept = manifest(run_dir).kept
    removed = []
    for entry in dir_entries(Path(run_dir)):
        if entry.name not in kept and owned_tmp_file(entry.name, owned) and entry.is_file(follow_symlinks=False):
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
    if any(name.startswith(f"{TENSORBOARD_DIR}/") for name in removed) and board.is_dir() and not dir_entries(board):
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
    if found and os.path.abspath(run_dir) in HELD_MANIFESTS:
        HELD_MANIFESTS[os.path.abspath(run_dir)].keep(found)


def _names(names: list[str]) -> str:
    shown = ", ".join(repr(name)[1:-1] for name in names[:5])  # repr: a newline in a name stays on the line
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")




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
    from rlf.storage.checkpoint import atomic_write

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

"""Checkpoints: a zip of JSON structure plus .npy arrays, written atomically, loaded without pickle.

torch.save/pickle would execute code from a file someone sent you. Here every leaf is JSON or an
array read with ``allow_pickle=False``, so loading a checkpoint can only ever produce data.
Tensors are accepted on save by duck typing (``.detach().cpu().numpy()``), so the core needs no torch.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from rlf.errors import CheckpointError, ConfigError

FORMAT = "rlf-checkpoint"
FORMAT_VERSION = 1


def to_array(value: Any) -> np.ndarray | None:
    """A numpy array or a torch tensor as a numpy array (on the CPU); None for anything else."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        return value.detach().cpu().numpy()
    return None


def _encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    array = to_array(value)
    if array is not None:
        if array.dtype == object:
            raise CheckpointError("object arrays cannot be checkpointed safely; store numbers instead")
        key = f"a{len(arrays)}"
        arrays[key] = array if array.flags.c_contiguous else array.copy(order="C")  # keeps 0-d arrays 0-d
        return {"__nd__": key}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in value):
            return {k: _encode(v, arrays) for k, v in value.items()}
        return {"__items__": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return [_encode(v, arrays) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise CheckpointError(f"cannot checkpoint a {type(value).__name__}; use arrays, numbers, strings, lists, dicts")


def check_storable(tree: Any) -> None:
    """Raise ``CheckpointError`` saying why where ``tree`` is not a ``StateTree`` a checkpoint can hold."""
    _encode(tree, {})


def _decode(value: Any, arrays: Callable[[str], np.ndarray]) -> Any:
    if isinstance(value, dict):
        if "__nd__" in value:
            return arrays(value["__nd__"])
        if "__items__" in value:
            return {_hashable(_decode(k, arrays)): _decode(v, arrays) for k, v in value["__items__"]}
        if "__tuple__" in value:
            return tuple(_decode(v, arrays) for v in value["__tuple__"])
        return {k: _decode(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    return value


def _hashable(key: Any) -> Any:
    return tuple(_hashable(k) for k in key) if isinstance(key, list | tuple) else key


def atomic_write(path: Path, write: Callable[[io.BufferedWriter], None],
                 before_replace: Callable[[], None] | None = None) -> None:
    """Write through a temporary file in the same directory and rename it over ``path``.

    ``before_replace`` runs once the new data is safely on disk, just before the rename.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save(path: Path, state: dict[str, Any], keep: int = 1, claim: Callable[[Path], Any] | None = None,
         owns: Callable[[Path], bool] | None = None) -> None:
    """Write ``state`` to ``path`` atomically; with ``keep`` > 1 the ``keep - 1`` previous checkpoints
    stay beside it as ``<stem>-1<suffix>`` (newest) ... so one bad write is never the only copy.

    In a run directory, ``claim(path)`` records each file rotation creates as the run's (or refuses
    it) and ``owns(path)`` says whether an existing copy is the run's: rotation never deletes or
    replaces a file the run did not write."""
    arrays: dict[str, np.ndarray] = {}
    structure = {"format": FORMAT, "format_version": FORMAT_VERSION, "state": _encode(state, arrays)}

    def write(handle) -> None:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr("structure.json", json.dumps(structure))
            for key, array in arrays.items():
                with archive.open(f"arrays/{key}.npy", "w", force_zip64=True) as out:
                    np.lib.format.write_array(out, array, allow_pickle=False)

    atomic_write(path, write, before_replace=lambda: _rotate(Path(path), keep, claim, owns))


def previous(path: Path, index: int) -> Path:
    path = Path(path)
    return path.with_name(f"{path.stem}-{index}{path.suffix}")


def _rotate(path: Path, keep: int, claim: Callable[[Path], Any] | None = None,
            owns: Callable[[Path], bool] | None = None) -> None:
    """Shift the kept copies one place back; the newest becomes ``-1`` as a hard link, so that at
    every instant ``path`` itself still names a complete checkpoint. With ``keep`` 1 nothing beside
    ``path`` is touched (``x-1.rlf`` next to a saved ``x.rlf`` may be the user's own file)."""
    if keep <= 1:
        return
    claim = claim or (lambda target: None)
    owns = owns or (lambda target: True)
    extra = keep
    while previous(path, extra).is_file():  # keep_checkpoints was lowered since they were written
        if owns(previous(path, extra)):
            previous(path, extra).unlink()
        extra += 1
    if not path.is_file():
        return
    for index in range(keep - 1, 0, -1):
        older = previous(path, index)
        if older.is_file() and owns(older):
            if index + 1 < keep:
                claim(previous(path, index + 1))
                os.replace(older, previous(path, index + 1))
            else:
                older.unlink()
    newest = previous(path, 1)
    claim(newest)
    try:
        os.link(path, newest)
    except OSError:  # a filesystem without hard links: copy, still atomically
        import shutil

        def copy(handle) -> None:
            with path.open("rb") as source:
                shutil.copyfileobj(source, handle, 1 << 24)

        atomic_write(newest, copy)


# -- reading ------------------------------------------------------------------------------------

GiB = 1 << 30


class Limits(BaseModel):
    """Caps on what reading a checkpoint may cost, checked before anything is read or allocated.

    Sized from real checkpoints (``benchmarks/checkpoint_sizes.py``; numbers in docs/TESTING.md): a
    Mario DQN checkpoint with its default 50,000-transition replay is about 0.4 GB, a Mario PPO one
    20 MB; both have about 60 members, a structure.json of about 12 kB nested 11 deep. The caps leave
    two orders of magnitude or more on top (a replay of millions of frames needs a raised cap). Override one with the environment variable
    ``RLF_CHECKPOINT_<FIELD>`` (e.g. ``RLF_CHECKPOINT_MAX_TOTAL_BYTES=200000000000``) or pass
    ``limits=`` to :func:`load`.
    """

    model_config = ConfigDict(extra="forbid")

    max_total_bytes: int = Field(64 * GiB, ge=1, description="Sum of the members' uncompressed sizes.")
    max_array_bytes: int = Field(32 * GiB, ge=1, description="One array's size, from its .npy header.")
    max_members: int = Field(100_000, ge=1, description="Files in the archive.")
    max_json_bytes: int = Field(64 << 20, ge=1, description="Size of structure.json.")
    max_json_depth: int = Field(64, ge=4, description="Nesting depth of structure.json.")
    max_compression_ratio: float = Field(
        50.0, ge=1, description="Uncompressed/compressed size of one member (rlf writes them uncompressed).")

    @classmethod
    def from_env(cls) -> Limits:
        values = {}
        for name in cls.model_fields:
            raw = os.environ.get(f"RLF_CHECKPOINT_{name.upper()}")
            if raw is not None:
                values[name] = raw
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problem = exc.errors()[0]
            raise ConfigError(f"RLF_CHECKPOINT_{str(problem['loc'][0]).upper()}: {problem['msg']}; "
                              "set it to a positive number or unset it") from None


class Manifest(BaseModel):
    """structure.json after the format check: the version and the state tree (an object)."""

    model_config = ConfigDict(extra="forbid")

    format: str
    format_version: StrictInt
    state: dict[str, Any]


_MEMBER = re.compile(r"arrays/a\d{1,9}\.npy")


def load(path: Path, limits: Limits | None = None) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    limits = limits or Limits.from_env()
    try:
        with zipfile.ZipFile(path) as archive:
            members = _check_members(path, archive, limits)
            structure = _read_structure(path, archive, members["structure.json"], limits)

            seen: set[str] = set()

            def read(key: Any) -> np.ndarray:
                info = members.get(f"arrays/{key}.npy") if isinstance(key, str) else None
                if info is None:
                    raise CheckpointError(f"checkpoint {path} is corrupt: array {key!r} is referenced but missing; "
                                          "restore it from a backup or start a new run")
                # rlf writes every array leaf as its own member: a member named twice would be read (and
                # held in memory) once per reference, so a small file could ask for any amount of memory
                if key in seen:
                    raise CheckpointError(f"checkpoint {path} is corrupt: array {key!r} is referenced more than "
                                          "once (rlf writes each array once); restore it from a backup or start "
                                          "a new run")
                seen.add(key)
                return _read_array(path, archive, info, limits)

            return _decode(structure, read)
    except CheckpointError:
        raise
    except MemoryError:
        raise CheckpointError(f"checkpoint {path} needs more memory than this machine has available "
                              f"({path.stat().st_size:,} bytes on disk); load it on a larger machine") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, ValueError, TypeError, OSError, EOFError,
            NotImplementedError, RuntimeError, OverflowError, zlib.error) as exc:
        raise CheckpointError(f"checkpoint {path} is corrupt ({type(exc).__name__}: {short_error(exc)}); "
                              "restore it from a backup or start a new run") from None


def short_error(exc: BaseException) -> str:
    """An exception's text on one line, at most 200 characters: for one-line error messages."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:200] + "..."


def _too_big(path: Path, what: str, size: float, limit: float, field: str) -> CheckpointError:
    return CheckpointError(f"checkpoint {path} is refused: {what} is {size:,.0f}, over the limit of {limit:,.0f}; "
                           f"if you trust this file, raise it with RLF_CHECKPOINT_{field.upper()}")


def _check_members(path: Path, archive: zipfile.ZipFile, limits: Limits) -> dict[str, zipfile.ZipInfo]:
    infos = archive.infolist()
    if len(infos) > limits.max_members:
        raise _too_big(path, "its member count", len(infos), limits.max_members, "max_members")
    members: dict[str, zipfile.ZipInfo] = {}
    total = 0
    file_size = path.stat().st_size
    for info in infos:
        name = info.filename
        if name != "structure.json" and not _MEMBER.fullmatch(name):
            raise CheckpointError(f"checkpoint {path} is refused: it holds {name[:80]!r}, which rlf never writes "
                                  "(only structure.json and arrays/a<N>.npy); it was not written by rlf")
        if name in members:
            raise CheckpointError(f"checkpoint {path} is refused: {name!r} appears twice; it was not written by rlf")
        if info.flag_bits & 0x1:
            raise CheckpointError(f"checkpoint {path} is refused: {name!r} is encrypted; it was not written by rlf")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise CheckpointError(f"checkpoint {path} is refused: {name!r} uses an unsupported compression")
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name!r} declares two different sizes")
        if info.header_offset + info.compress_size > file_size:
            raise CheckpointError(f"checkpoint {path} is corrupt: {name!r} claims {info.compress_size:,} bytes, "
                                  "larger than the file; restore it from a backup or start a new run")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.compress_type != zipfile.ZIP_STORED and ratio > limits.max_compression_ratio:
            raise _too_big(path, f"{name!r}'s compression ratio (a zip bomb?)", ratio, limits.max_compression_ratio,
                           "max_compression_ratio")
        total += info.file_size
        members[name] = info
    if total > limits.max_total_bytes:
        raise _too_big(path, "its uncompressed size", total, limits.max_total_bytes, "max_total_bytes")
    if "structure.json" not in members:
        raise CheckpointError(f"checkpoint {path} is corrupt: it has no structure.json; "
                              "restore it from a backup or start a new run")
    return members


def _read_structure(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits) -> Any:
    if info.file_size > limits.max_json_bytes:
        raise _too_big(path, "structure.json", info.file_size, limits.max_json_bytes, "max_json_bytes")
    try:
        data = json.loads(archive.read(info))
    except RecursionError:
        data = None
        depth = limits.max_json_depth + 1
    else:
        depth = _depth(data, limits.max_json_depth)
    if depth > limits.max_json_depth:
        raise _too_big(path, "structure.json's nesting depth", depth, limits.max_json_depth, "max_json_depth")
    if not isinstance(data, dict):
        raise CheckpointError(f"checkpoint {path} is not an rlf checkpoint: structure.json holds a "
                              f"{type(data).__name__}, not an object")
    if data.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an rlf checkpoint")
    version = data.get("format_version", 0)
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise CheckpointError(f"{path} was written by a newer rlf; upgrade rlf to read it")
    try:
        return Manifest.model_validate(data).state
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise CheckpointError(f"checkpoint {path} is corrupt: structure.json {where}: {problem['msg'].lower()}; "
                              "restore it from a backup or start a new run") from None


def _depth(tree: Any, limit: int) -> int:
    """Nesting depth, iteratively (a recursive walk is what a deep file would attack), stopping past limit."""
    deepest, todo = 0, [(tree, 1)]
    while todo:
        node, depth = todo.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            todo.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _read_array(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits) -> np.ndarray:
    """Header first: dtype and size are checked before a byte of data is read or allocated."""
    fmt = np.lib.format
    with archive.open(info) as handle:
        version = fmt.read_magic(handle)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(handle)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = fmt.read_array_header_2_0(handle)
        else:
            raise ValueError(f"unsupported .npy version {version}")
        if dtype.hasobject:
            raise CheckpointError(f"checkpoint {path} is refused: {info.filename} holds Python objects, which "
                                  "could run code when read; it was not written by rlf")
        count = 1
        for dim in shape:
            count *= int(dim)
        nbytes = count * dtype.itemsize
        if nbytes > limits.max_array_bytes:
            raise _too_big(path, f"{info.filename} (from its header)", nbytes, limits.max_array_bytes,
                           "max_array_bytes")
        header = handle.tell() if handle.seekable() else None
        if header is not None and header + nbytes != info.file_size:
            raise CheckpointError(f"checkpoint {path} is corrupt: {info.filename} declares {shape} {dtype} "
                                  f"({nbytes:,} bytes) but holds {info.file_size - header:,}")
        array = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
        view = memoryview(array.reshape(-1, order="A").view(np.uint8)) if nbytes else memoryview(b"")
        done = 0
        while done < nbytes:
            got = handle.readinto(view[done:done + (16 << 20)])
            if not got:
                raise EOFError(f"{info.filename} ends after {done:,} of {nbytes:,} bytes")
            done += got
        return array


def map_arrays(tree: Any, fn: Callable[[np.ndarray], Any]) -> Any:
    """Apply ``fn`` to every array leaf, e.g. ``torch.as_tensor`` when loading optimizer state."""
    if isinstance(tree, np.ndarray):
        return fn(tree)
    if isinstance(tree, dict):
        return {k: map_arrays(v, fn) for k, v in tree.items()}
    if isinstance(tree, list):
        return [map_arrays(v, fn) for v in tree]
    if isinstance(tree, tuple):
        return tuple(map_arrays(v, fn) for v in tree)
    return tree

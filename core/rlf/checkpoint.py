"""Checkpoints: a zip of JSON structure plus .npy arrays, written atomically, loaded without pickle.

torch.save/pickle would execute code from a file someone sent you. Here every leaf is JSON or an
array read with ``allow_pickle=False``, so loading a checkpoint can only ever produce data.
Tensors are accepted on save by duck typing (``.detach().cpu().numpy()``), so the core needs no torch.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .errors import CheckpointError

FORMAT = "rlf-checkpoint"
FORMAT_VERSION = 1


def _to_array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        return value.detach().cpu().numpy()
    return None


def _encode(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    array = _to_array(value)
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


def atomic_write(path: Path, write: Callable[[io.BufferedWriter], None]) -> None:
    """Write through a temporary file in the same directory and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save(path: Path, state: dict[str, Any]) -> None:
    arrays: dict[str, np.ndarray] = {}
    structure = {"format": FORMAT, "format_version": FORMAT_VERSION, "state": _encode(state, arrays)}

    def write(handle) -> None:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
            archive.writestr("structure.json", json.dumps(structure))
            for key, array in arrays.items():
                with archive.open(f"arrays/{key}.npy", "w", force_zip64=True) as out:
                    np.lib.format.write_array(out, array, allow_pickle=False)

    atomic_write(path, write)


def load(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    try:
        with zipfile.ZipFile(path) as archive:
            structure = json.loads(archive.read("structure.json"))
            if structure.get("format") != FORMAT:
                raise CheckpointError(f"{path} is not an rlf checkpoint")
            if structure.get("format_version", 0) > FORMAT_VERSION:
                raise CheckpointError(f"{path} was written by a newer rlf; upgrade rlf to read it")

            def read(key: str) -> np.ndarray:
                with archive.open(f"arrays/{key}.npy") as handle:
                    return np.lib.format.read_array(io.BytesIO(handle.read()), allow_pickle=False)

            return _decode(structure["state"], read)
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint {path} is corrupt ({type(exc).__name__}: {exc}); "
                              "restore it from a backup or start a new run") from None


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

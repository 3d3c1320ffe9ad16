"""A generated corpus of hostile and broken checkpoints: each is one CheckpointError line, exit 2 at the CLI.

Every case goes through ``rlf eval FILE`` (the CLI's main, in this process: the same code path as the
command, minus the interpreter start) and must print exactly one ``rlf: error:`` line naming the
problem; the zip bomb also runs in a subprocess under a 1 GiB address-space limit, so reading it
whole would fail the test.
"""

from __future__ import annotations

import io
import json
import re
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import rlf
from rlf.cli.commands import main
from rlf.storage import checkpoint as ckpt

HEADER = {"format": "rlf-checkpoint", "format_version": 1}


def _zip(path: Path, members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _structure(state, **top) -> bytes:
    return json.dumps({**HEADER, "state": state, **top}).encode()


def _npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=allow_pickle)
    return out.getvalue()


def _npy_header(shape, descr="<f8", version=(1, 0), pad_to: int = 0) -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * max(0, pad_to - len(header)) + b"\n"
    if version == (1, 0):
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header
    return b"\x93NUMPY\x02\x00" + struct.pack("<I", len(header)) + header


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


class _Flushed:
    def flush(self) -> bytes:
        return b""


def _bomb(path: Path, size: int, honest: bool = True) -> Path:
    """A real deflate bomb: ``size`` zero bytes (after a valid .npy header) in a few hundred kB."""
    header = _npy_header((size // 8,))
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(1 << 22)
    body = [compressor.compress(header)]
    crc = zlib.crc32(header)
    for _ in range(size // len(chunk)):
        body.append(compressor.compress(chunk))
        crc = zlib.crc32(chunk, crc)
    body.append(compressor.flush())
    data = b"".join(body)
    info = zipfile.ZipInfo("arrays/a0.npy")
    info.compress_type = zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("structure.json", _structure({"x": {"__nd__": "a0"}}))
        # write the pre-compressed member by hand: the zipfile API would compress 1 GiB itself
        with archive.open(info, "w", force_zip64=True) as out:
            out._compressor = _Flushed() if honest else None  # None: the entry claims len(data) uncompressed
            out._fileobj.write(data)
            out._compress_size = len(data)
            out._file_size = len(header) + size
            out._crc = crc
    return path


def _valid(path: Path) -> Path:
    ckpt.save(path, {"w": np.ones((3, 4)), "n": 1})
    return path


def _truncated(tmp: Path, fraction: float) -> Path:
    data = _valid(tmp / "whole.rlf").read_bytes()
    (tmp / "cut.rlf").write_bytes(data[: int(len(data) * fraction)])
    return tmp / "cut.rlf"


CASES = {
    # name: (builder(tmp) -> path, fragment of the one error line)
    "pickle payload": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__nd__": "a0"}}),
                                                    "arrays/a0.npy": _npy(np.array([{"a": 1}]), True)}),
                       "holds Python objects"),
    "traversal ../": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({}), "../../evil.npy": b"x"}),
                      "which rlf never writes"),
    "absolute name": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({}), "/etc/passwd": b"x"}),
                      "which rlf never writes"),
    "traversal in arrays/": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({}),
                                                          "arrays/../../a0.npy": b"x"}), "which rlf never writes"),
    "deep json (past the recursion limit)": (
        lambda t: _zip(t / "c.rlf", {"structure.json": b'{"format": "rlf-checkpoint", "format_version": 1, '
                                                       b'"state": {"x": ' + _deep(200_000).encode() + b"}}"}),
        "nesting depth"),
    "deep json (under the recursion limit)": (
        lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": json.loads(_deep(500))})}), "nesting depth"),
    "8 TiB .npy header": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__nd__": "a0"}}),
                                                       "arrays/a0.npy": _npy_header((1 << 40,)) + bytes(64)}),
                          "from its header"),
    "huge .npy header length": (
        lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__nd__": "a0"}}),
                                     "arrays/a0.npy": _npy_header((2,), version=(2, 0), pad_to=200_000)}),
        "corrupt"),
    "npy header lies about size": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__nd__": "a0"}}),
                                                                "arrays/a0.npy": _npy_header((100,)) + bytes(8)}),
                                   "declares (100,)"),
    "member sizes larger than the file": (lambda t: _bomb(t / "c.rlf", 1 << 24, honest=False),
                                          "larger than the file"),
    "list at top level": (lambda t: _zip(t / "c.rlf", {"structure.json": b"[1, 2, 3]"}), "holds a list"),
    "string at top level": (lambda t: _zip(t / "c.rlf", {"structure.json": b'"hi"'}), "holds a str"),
    "state is a string": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure("oops")}),
                          "structure.json state"),
    "format_version is a string": (
        lambda t: _zip(t / "c.rlf", {"structure.json": json.dumps({**HEADER, "format_version": "1",
                                                                    "state": {}}).encode()}), "format_version"),
    "unknown manifest key": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({}, extra=1)}), "extra"),
    "__nd__ is a number": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__nd__": 5}})}),
                           "referenced but missing"),
    "__nd__ names a missing array": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__nd__": "a9"}})}),
                                     "referenced but missing"),
    "__items__ is a string": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__items__": "ab"}})}),
                              "corrupt"),
    "__tuple__ is a number": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__tuple__": 3}})}),
                              "corrupt"),
    "unhashable key": (lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": {"__items__": [[{"a": 1}, 2]]}})}),
                       "corrupt"),
    "duplicate member": (lambda t: _dup(t), "appears twice"),
    # a 0.8 MB member named 10,000 times would be 8 GB in memory if each reference were read again
    "one array referenced many times": (
        lambda t: _zip(t / "c.rlf", {"structure.json": _structure({"x": [{"__nd__": "a0"}] * 10_000}),
                                     "arrays/a0.npy": _npy(np.zeros(100_000))}),
        "referenced more than once"),
    "no structure.json": (lambda t: _zip(t / "c.rlf", {"arrays/a0.npy": _npy(np.ones(2))}), "no structure.json"),
    "not a zip": (lambda t: _write(t / "c.rlf", b"\x00" * 100), "corrupt"),
    "empty file": (lambda t: _write(t / "c.rlf", b""), "corrupt"),
    "newer format": (lambda t: _zip(t / "c.rlf", {"structure.json": json.dumps({**HEADER, "format_version": 99,
                                                                                "state": {}}).encode()}), "newer rlf"),
    "foreign format": (lambda t: _zip(t / "c.rlf", {"structure.json": b'{"format": "x"}'}), "not an rlf checkpoint"),
    "compressed structure.json bomb": (
        lambda t: _zip(t / "c.rlf", {"structure.json": b'{"format": "rlf-checkpoint", "format_version": 1, '
                                                       b'"state": {"x": "' + b"a" * 5_000_000 + b'"}}'},
                       zipfile.ZIP_DEFLATED), "compression ratio"),
    **{f"truncated at {int(f * 100)}%": (lambda t, f=f: _truncated(t, f), "corrupt")
       for f in (0.05, 0.2, 0.5, 0.8, 0.95, 0.99)},
    "missing learner state": (lambda t: _run_state(t, lambda s: s["strategy"].pop("learner")),
                              "has no strategy.learner (the learner's state)"),
    "missing agent state": (lambda t: _run_state(t, lambda s: s["strategy"].pop("agent")),
                            "has no strategy.agent (the agent's weights)"),
    "missing RNG state": (lambda t: _run_state(t, lambda s: s.pop("rng")), "has no rng (the RNG state)"),
    "counters of the wrong type": (lambda t: _run_state(t, lambda s: s["counters"].update(env_steps="many")),
                                   "counters.env_steps"),
    "config without an algorithm": (lambda t: _run_state(t, lambda s: s["config"]["run"].pop("algorithm")),
                                    "config.run.algorithm"),
    "weights of the wrong shape": (lambda t: _run_state(t, _reshape_weights),
                                   "does not fit this agent (agent.params.agent.pi: checkpoint (7, 2) float64, "
                                   "model (5, 2) float64)"),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _dup(tmp: Path) -> Path:
    import warnings

    path = tmp / "c.rlf"
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate it is told to write
        archive.writestr("structure.json", _structure({}))
        archive.writestr("structure.json", _structure({}))
    return path


# rlf.load reads and checks the file; these only show once the agent is built and loaded (eval, train)
FOUND_WHEN_BUILT = {"weights of the wrong shape"}
_TRAINED: dict[str, Path] = {}


def _run_state(tmp: Path, edit) -> Path:
    state = ckpt.load(_TRAINED["linear-pg"])
    edit(state)
    ckpt.save(tmp / "c.rlf", state)
    return tmp / "c.rlf"


def _reshape_weights(state) -> None:
    state["strategy"]["agent"]["params"]["agent"]["pi"] = np.zeros((7, 2))


@pytest.fixture(scope="module", autouse=True)
def trained(tmp_path_factory, registry):
    """A real checkpoint (linear policy on CartPole) for the cases that edit one; the test registry as
    the CLI's, so `rlf eval` resolves the test plugins in this process."""
    import rlf.plugins.loading

    path = tmp_path_factory.mktemp("trained") / "pg.rlf"
    algo = rlf.make("linear-pg", "gym:CartPole-v1", overrides=["steps=64", "progress=false",
                                                               f"run_dir='{path.parent / 'run'}'"], registry=registry)
    algo.train()
    _TRAINED["linear-pg"] = algo.save(path)
    saved, rlf.plugins.loading._cached = rlf.plugins.loading._cached, registry
    yield
    rlf.plugins.loading._cached = saved


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_checkpoint_is_one_line_with_exit_2(case, tmp_path, capsys):
    build, fragment = CASES[case]
    path = build(tmp_path)
    if case not in FOUND_WHEN_BUILT:
        with pytest.raises(rlf.CheckpointError) as error:
            rlf.load(path)
        assert "\n" not in str(error.value)
    code = main(["eval", str(path), "--episodes", "1"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("rlf: error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("whole.rlf",)) == ["c.rlf"] or \
        case.startswith("truncated")   # nothing written or extracted beside it


def test_the_corpus_is_big_enough():
    assert len(CASES) >= 35


def test_a_1_gib_zip_bomb_is_refused_without_reading_it(tmp_path):
    path = _bomb(tmp_path / "bomb.rlf", 1 << 30)
    assert path.stat().st_size < 2 << 20
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from rlf.cli.commands import main; sys.exit(main(['eval', sys.argv[1]]))")
    result = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "compression ratio" in result.stderr and "zip bomb" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_limits_are_overridable_and_validated(tmp_path, monkeypatch, capsys):
    path = _valid(tmp_path / "ok.rlf")
    assert ckpt.load(path)["n"] == 1
    for variable, value, fragment in (("RLF_CHECKPOINT_MAX_TOTAL_BYTES", "100", "uncompressed size"),
                                      ("RLF_CHECKPOINT_MAX_MEMBERS", "1", "member count"),
                                      ("RLF_CHECKPOINT_MAX_ARRAY_BYTES", "8", "a0.npy (from its header)")):
        with monkeypatch.context() as env:
            env.setenv(variable, value)
            with pytest.raises(rlf.CheckpointError, match=re.escape(fragment)) as error:
                ckpt.load(path)
            assert variable in str(error.value)   # the message says how to raise the limit
    monkeypatch.setenv("RLF_CHECKPOINT_MAX_MEMBERS", "lots")
    assert main(["eval", str(path)]) == 2
    assert "RLF_CHECKPOINT_MAX_MEMBERS" in capsys.readouterr().err
    monkeypatch.delenv("RLF_CHECKPOINT_MAX_MEMBERS")
    assert ckpt.load(path, limits=ckpt.Limits(max_members=2))["n"] == 1
    with pytest.raises(rlf.CheckpointError, match="member count"):
        ckpt.load(path, limits=ckpt.Limits(max_members=1))


def test_resume_with_a_misfitting_checkpoint_names_the_tensor_and_keeps_it(tmp_path, registry):
    run = tmp_path / "run"
    algo = rlf.make("linear-pg", "gym:CartPole-v1", overrides=["steps=64", "progress=false", f"run_dir='{run}'"],
                    registry=registry)
    algo.train()
    state = ckpt.load(run / "checkpoint.rlf")
    _reshape_weights(state)
    ckpt.save(run / "checkpoint.rlf", state)
    before = (run / "checkpoint.rlf").read_bytes()
    with pytest.raises(rlf.CheckpointError, match=r"agent\.params\.agent\.pi: checkpoint \(7, 2\)"):
        rlf.load(run, registry=registry).train(steps=128)
    assert (run / "checkpoint.rlf").read_bytes() == before


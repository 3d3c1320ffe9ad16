import zipfile

import numpy as np
import pytest

from rlf import CheckpointError
from rlf.storage import checkpoint as ckpt


def test_round_trip_keeps_structure_types_and_arrays(tmp_path):
    state = {"weights": {"w": np.arange(6, dtype=np.float32).reshape(2, 3)},
             "optimizer": {"state": {0: {"step": np.array(3.0)}, 1: {}}, "param_groups": [{"betas": (0.9, 0.99)}]},
             "counters": {"steps": 10, "ratio": 0.5, "flag": True, "name": "x", "none": None},
             "uint8": np.zeros((2, 84, 84), dtype=np.uint8), "scalar": np.float32(1.5)}
    ckpt.save(tmp_path / "c.rlf", state)
    back = ckpt.load(tmp_path / "c.rlf")
    np.testing.assert_array_equal(back["weights"]["w"], state["weights"]["w"])
    assert back["weights"]["w"].dtype == np.float32
    assert set(back["optimizer"]["state"]) == {0, 1}          # integer keys survive
    assert back["optimizer"]["param_groups"][0]["betas"] == (0.9, 0.99)
    assert back["counters"] == state["counters"]
    assert back["uint8"].dtype == np.uint8 and back["scalar"] == 1.5
    assert back["optimizer"]["state"][0]["step"].shape == ()  # 0-d arrays stay 0-d (Adam's step)


def test_pickled_or_object_data_is_refused(tmp_path):
    with pytest.raises(CheckpointError):
        ckpt.save(tmp_path / "c.rlf", {"obj": np.array([object()], dtype=object)})
    with pytest.raises(CheckpointError):
        ckpt.save(tmp_path / "c.rlf", {"fn": print})
    # A crafted archive holding a pickled object array is read with allow_pickle=False: refused.
    path = tmp_path / "evil.rlf"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("structure.json", '{"format": "rlf-checkpoint", "format_version": 1, '
                                           '"state": {"x": {"__nd__": "a0"}}}')
        with archive.open("arrays/a0.npy", "w") as out:
            np.lib.format.write_array(out, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(CheckpointError, match="holds Python objects"):
        ckpt.load(path)


def test_a_failed_write_never_replaces_the_last_good_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "c.rlf"
    ckpt.save(path, {"v": np.ones(3)})
    good = path.read_bytes()

    def exploding_write_array(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np.lib.format, "write_array", exploding_write_array)
    with pytest.raises(OSError):
        ckpt.save(path, {"v": np.zeros(3)})
    assert path.read_bytes() == good
    assert [p.name for p in tmp_path.iterdir()] == ["c.rlf"]  # no temporary file left behind


def test_foreign_truncated_and_newer_files(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint"):
        ckpt.load(tmp_path / "missing.rlf")
    (tmp_path / "text.rlf").write_text("hello")
    with pytest.raises(CheckpointError, match="corrupt"):
        ckpt.load(tmp_path / "text.rlf")
    ckpt.save(tmp_path / "ok.rlf", {"v": np.ones(1000)})
    data = (tmp_path / "ok.rlf").read_bytes()
    (tmp_path / "cut.rlf").write_bytes(data[:-200])
    with pytest.raises(CheckpointError, match="corrupt"):
        ckpt.load(tmp_path / "cut.rlf")
    with zipfile.ZipFile(tmp_path / "other.rlf", "w") as archive:
        archive.writestr("structure.json", '{"format": "something-else"}')
    with pytest.raises(CheckpointError, match="not an rlf checkpoint"):
        ckpt.load(tmp_path / "other.rlf")
    with zipfile.ZipFile(tmp_path / "new.rlf", "w") as archive:
        archive.writestr("structure.json", '{"format": "rlf-checkpoint", "format_version": 99, "state": {}}')
    with pytest.raises(CheckpointError, match="newer rlf"):
        ckpt.load(tmp_path / "new.rlf")


def test_keep_rotates_previous_checkpoints_and_drops_extra_ones(tmp_path):
    path = tmp_path / "checkpoint.rlf"
    for step in range(1, 5):
        ckpt.save(path, {"step": step}, keep=3)
    assert [ckpt.load(p)["step"] for p in (path, ckpt.previous(path, 1), ckpt.previous(path, 2))] == [4, 3, 2]
    assert not ckpt.previous(path, 3).exists()
    ckpt.save(path, {"step": 5}, keep=2)     # keep lowered: the copy past it goes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-1.rlf", "checkpoint.rlf"]
    ckpt.save(path, {"step": 6})             # keep=1 (a plain save) never touches files beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-1.rlf", "checkpoint.rlf"]

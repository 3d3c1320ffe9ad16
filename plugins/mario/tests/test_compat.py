"""The numpy-2 patches: each overflow reproduced with the library's own code, and fixed by ours."""

import warnings

import numpy as np
import pytest
from conftest import NUMPY_2, RIGHT, run_episode
from rlf_plugin_mario import compat

compat.apply()
from gym_super_mario_bros._roms import rom_path  # noqa: E402 - after the quiet gym import
from gym_super_mario_bros.smb_env import SuperMarioBrosEnv  # noqa: E402
from nes_py._rom import ROM  # noqa: E402


def ram_stub(patched: bool, **cells):
    """An object with a console RAM and Mario's position properties, original or patched."""
    props = {name: (SuperMarioBrosEnv.__dict__[name] if patched else compat.unpatched(SuperMarioBrosEnv, name))
             for name in ("_x_position", "_left_x_position", "_y_position", "_y_pixel", "_y_viewport")}
    stub = type("RamStub", (), props)()
    stub.ram = np.zeros(0x800, dtype=np.uint8)
    for address, value in cells.items():
        stub.ram[int(address[1:], 16)] = value
    return stub


def test_apply_is_idempotent_and_keeps_the_originals():
    before = {name: SuperMarioBrosEnv.__dict__[name] for name in ("_x_position", "_left_x_position", "_y_position")}
    compat.apply()
    compat.apply()
    assert compat.is_applied()
    for name, prop in before.items():
        assert SuperMarioBrosEnv.__dict__[name] is prop
        original = compat.unpatched(SuperMarioBrosEnv, name)
        assert original is not prop and original.fget.__module__ == "gym_super_mario_bros.smb_env"
    assert compat.unpatched(ROM, "prg_rom_size").fget.__module__ == "nes_py._rom"


def test_x_position_past_the_first_screen_page():
    cells = {"x6d": 3, "x86": 0x20}  # page 3, x 32 on the page -> 800
    original = ram_stub(False, **cells)
    if NUMPY_2:
        with pytest.raises(OverflowError, match="out of bounds for uint8"):
            original._x_position  # noqa: B018
    else:
        assert original._x_position == 800
    fixed = ram_stub(True, **cells)._x_position
    assert fixed == 800 and type(fixed) is int


def test_left_x_position_when_the_camera_is_ahead():
    cells = {"x86": 5, "x71c": 10}  # (5 - 10) % 256
    original = ram_stub(False, **cells)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # numpy 1: out-of-bound conversion warns
        if NUMPY_2:
            with pytest.raises(OverflowError, match="out of bounds for uint8"):
                original._left_x_position  # noqa: B018
        else:
            assert original._left_x_position == 251
    assert ram_stub(True, **cells)._left_x_position == 251


def test_y_position_above_the_viewport():
    cells = {"xb5": 0, "x3b8": 10}  # above the screen: 255 + (255 - 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        original = ram_stub(False, **cells)._y_position
    # numpy 2 keeps the uint8 type and silently wraps (a RuntimeWarning); numpy 1 widened the result
    assert original == (500 % 256 if NUMPY_2 else 500)
    assert ram_stub(True, **cells)._y_position == 500
    assert ram_stub(True, xb5=1, x3b8=10)._y_position == 245


def test_rom_header_sizes():
    class OriginalRom(ROM):
        prg_rom_size = compat.unpatched(ROM, "prg_rom_size")
        chr_rom_size = compat.unpatched(ROM, "chr_rom_size")

    path = rom_path(False, "vanilla")
    if NUMPY_2:
        with pytest.raises(OverflowError, match="1024 out of bounds for uint8"):
            OriginalRom(path).prg_rom  # noqa: B018
    else:
        assert len(OriginalRom(path).prg_rom) == 32 * 1024
    rom = ROM(path)
    assert (rom.prg_rom_size, rom.chr_rom_size, rom.prg_ram_size) == (32, 8, 8)
    assert type(rom.prg_rom_size) is int
    assert len(rom.prg_rom) == 32 * 1024 and len(rom.chr_rom) == 8 * 1024


def test_env_runs_past_x_256_with_python_number_infos(make):
    env = make(noop_max=0)
    env.reset(seed=0)
    _, _, info, terminated, _ = run_episode(env, RIGHT)
    assert terminated and info["episode_metrics"]["x_pos_max"] > 256
    for key in ("x_pos", "y_pos", "world", "stage", "life", "score", "time", "coins"):
        assert type(info[key]) is int, key
    assert type(info["flag_get"]) is bool

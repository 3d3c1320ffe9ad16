"""numpy-2 compatibility of nes-py 8.2.1 and gym-super-mario-bros 7.4.0, in one place.

Both libraries do arithmetic on ``np.uint8`` scalars read from the ROM header and the console RAM.
numpy 1 promoted ``np.uint8(2) * 1024`` to a wider type; numpy 2 (NEP 50) keeps the scalar's uint8
type and raises ``OverflowError: Python integer 1024 out of bounds for uint8``. The places that do so:

* ``nes_py._rom.ROM.prg_rom_size`` / ``chr_rom_size`` / ``prg_ram_size``: header bytes times a size
  (later times 2**10), so building any environment fails;
* ``SuperMarioBrosEnv._x_position``: ``ram[0x6d] * 0x100 + ram[0x86]`` fails on every step (0x100
  itself does not fit a uint8);
* ``SuperMarioBrosEnv._left_x_position``: ``np.uint8(negative int)`` fails whenever the camera is
  ahead of Mario's low x byte;
* ``SuperMarioBrosEnv._y_position``: ``255 + (255 - y)`` above the viewport silently wraps to uint8.

``apply()`` replaces exactly these properties with versions that read the bytes as Python ints
first. It is idempotent, changes nothing else, and gives the values numpy 1 gave. It runs when an
environment is built. ``unpatched()`` returns the library's originals (for the tests that
reproduce the overflows).
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any

_MARK = "_rlf_mario_compat"
_originals: dict[tuple[type, str], property] = {}


def import_quietly() -> None:
    """Import gym 0.26 without its stderr notice that it "does not support NumPy 2.0".

    The notice is printed on every import (so once per subprocess worker); the parts of gym this
    plugin uses (``gym.Env``, ``gym.spaces``) work on numpy 2 once ``apply()`` has run. gym's env
    checker, which does use the removed ``np.bool8``, is never invoked: the emulator is built
    directly, not through ``gym.make``.
    """
    if "gym" not in sys.modules:
        with contextlib.redirect_stderr(io.StringIO()):
            import gym  # noqa: F401


# -- the replacements ----------------------------------------------------------------------------

def _prg_rom_size(self) -> int:
    """Size of the PRG ROM in KB."""
    return 16 * int(self.header[4])


def _chr_rom_size(self) -> int:
    """Size of the CHR ROM in KB."""
    return 8 * int(self.header[5])


def _prg_ram_size(self) -> int:
    """Size of the PRG RAM in KB (a zero header byte means one 8 KB bank)."""
    return 8 * (int(self.header[8]) or 1)


def _x_position(self) -> int:
    """Mario's horizontal position in the level: screen page (0x6d) * 256 + x on the page (0x86)."""
    return int(self.ram[0x6D]) * 0x100 + int(self.ram[0x86])


def _left_x_position(self) -> int:
    """Pixels between Mario and the left edge of the screen, modulo 256."""
    return (int(self.ram[0x86]) - int(self.ram[0x071C])) % 256


def _y_position(self) -> int:
    """Height above the bottom of the screen; above the viewport it continues past 255."""
    y_pixel = int(self.ram[0x03B8])
    if int(self.ram[0x00B5]) < 1:
        return 255 + (255 - y_pixel)
    return 255 - y_pixel


def _targets() -> list[tuple[type, str, Any]]:
    import_quietly()
    from gym_super_mario_bros.smb_env import SuperMarioBrosEnv
    from nes_py._rom import ROM

    return [
        (ROM, "prg_rom_size", _prg_rom_size),
        (ROM, "chr_rom_size", _chr_rom_size),
        (ROM, "prg_ram_size", _prg_ram_size),
        (SuperMarioBrosEnv, "_x_position", _x_position),
        (SuperMarioBrosEnv, "_left_x_position", _left_x_position),
        (SuperMarioBrosEnv, "_y_position", _y_position),
    ]


def apply() -> None:
    """Patch the properties above (once per process; later calls do nothing)."""
    for cls, name, fget in _targets():
        current = cls.__dict__[name]
        if getattr(current.fget, _MARK, False):
            continue
        _originals[(cls, name)] = current
        setattr(fget, _MARK, True)
        setattr(cls, name, property(fget, doc=fget.__doc__))


def is_applied() -> bool:
    return all(getattr(cls.__dict__[name].fget, _MARK, False) for cls, name, _ in _targets())


def unpatched(cls: type, name: str) -> property:
    """The library's own property (whether or not ``apply()`` has run)."""
    return _originals.get((cls, name), cls.__dict__[name])

"""Super Mario Bros as a Gymnasium env: nes-py's emulator, frame skip, preprocessing, episode stats.

gym-super-mario-bros 7.4.0 and nes-py 8.2.1 speak the legacy gym 0.26 API (4-tuple ``step``, a
``reset`` that takes no seed through ``JoypadSpace``). ``MarioEnv`` drives the ``SuperMarioBrosEnv``
emulator directly (not through ``gym.make``, so none of gym's wrappers or its numpy-2-incompatible
env checker run) and presents the Gymnasium API: ``reset(seed=, options=)`` and a 5-tuple ``step``.

Seeding. The NES is deterministic: every reset restores the same snapshot taken after the title
screen, and the same actions replay the same game frame for frame. What a seed controls is
therefore only (a) how many no-op frames (0..``noop_max``) are emulated after a reset, which shifts
the in-game timer and enemy positions relative to Mario, and (b) which level ``random_stages``
draws. Both come from the env's Gymnasium ``np_random``: ``reset(seed=s)`` makes the following
episodes reproducible; with ``noop_max=0`` and a fixed level every episode starts identically,
whatever the seed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from rlf import EPISODE_METRICS

from . import compat
from .config import MarioConfig
from .preprocess import FramePipeline

SCREEN_HEIGHT, SCREEN_WIDTH = 240, 256
ROM_MODES = {"standard": "vanilla", "downsample": "downsample", "pixel": "pixel", "rectangle": "rectangle"}
GAME_OVER_LIFE = 0xFF
"""The life counter reads 2, 1, 0 for the three lives and 255 once the game is over."""


def action_set(name: str) -> tuple[list[int], list[str]]:
    """Controller bytes and meanings of a gym-super-mario-bros action set (e.g. "SIMPLE_MOVEMENT")."""
    compat.import_quietly()
    from gym_super_mario_bros import actions
    from nes_py.wrappers import JoypadSpace

    buttons = JoypadSpace._button_map
    combos = getattr(actions, name)
    codes = []
    for combo in combos:
        code = 0
        for button in combo:
            code |= buttons[button]
        codes.append(code)
    return codes, [" ".join(combo) for combo in combos]


class _Emulator:
    """One ``SuperMarioBrosEnv`` and a zero-copy (H, W, C) view of its screen buffer."""

    def __init__(self, rom: str, level: tuple[int, int] | None):
        from gym_super_mario_bros.smb_env import SuperMarioBrosEnv

        self.env = SuperMarioBrosEnv(rom_mode=ROM_MODES[rom], target=level)
        screen = self.env.screen  # RGB view with negative strides into the emulator's BGRx buffer
        base = screen.base
        self._raw = None
        if isinstance(base, np.ndarray) and base.size == SCREEN_HEIGHT * SCREEN_WIDTH * 4:
            raw = base.reshape(SCREEN_HEIGHT, SCREEN_WIDTH, 4)
            if np.array_equal(raw[:, :, 2::-1], screen):
                self._raw = raw
        # nes-py's little-endian layout is BGRx; anything else falls back to copying the RGB view
        self.channels, self.rgb_index = (4, (2, 1, 0)) if self._raw is not None else (3, (0, 1, 2))

    def frame(self) -> np.ndarray:
        """The current screen as (H, W, channels) uint8: a live view, or a fresh copy in the fallback."""
        return self._raw if self._raw is not None else np.ascontiguousarray(self.env.screen)

    def rgb(self) -> np.ndarray:
        """A copy of the current screen as (240, 256, 3) RGB."""
        return self.env.screen.copy()

    def info(self) -> dict[str, Any]:
        return self.env._get_info()

    def close(self) -> None:
        if self.env._env is not None:
            self.env.close()


def python_info(raw: Mapping[str, Any]) -> dict[str, Any]:
    """gym-super-mario-bros' info with numpy scalars turned into Python bools and ints."""
    info: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, (bool, np.bool_)):
            info[key] = bool(value)
        elif isinstance(value, (int, np.integer)):
            info[key] = int(value)
        elif isinstance(value, np.floating):
            info[key] = float(value)
        else:
            info[key] = value
    return info


def lives_left(life: int) -> int:
    return -1 if life == GAME_OVER_LIFE else life


CELL_PX = 16
"""The side of a coverage cell in level pixels: one tile of the NES level grid (1-1 is about 210 x 15)."""


class EpisodeStats:
    """What ``info["episode_metrics"]`` reports for one episode (as the learner sees episodes).

    ``cells_visited`` counts the distinct level tiles (``CELL_PX`` square, from ``x_pos``/``y_pos``) Mario
    was in at an agent step: coverage, which tells an episode that explored (jumped onto pipes, went back,
    climbed) from one that ran as far along the floor; ``x_pos_max`` alone cannot."""

    def __init__(self) -> None:
        self.reset({"x_pos": 0, "world": 1, "stage": 1, "flag_get": False})

    def reset(self, info: Mapping[str, Any]) -> None:
        self.raw_return = 0.0
        self.x_pos_max = int(info["x_pos"])
        self.start = (int(info["world"]), int(info["stage"]))
        self.flag = bool(info["flag_get"])
        self.moved_on = False
        self.cells: set[tuple[int, int]] = set()
        self._visit(info)

    def update(self, info: Mapping[str, Any], raw_reward: float) -> None:
        self.raw_return += raw_reward
        self.x_pos_max = max(self.x_pos_max, int(info["x_pos"]))
        self.flag = self.flag or bool(info["flag_get"])
        self.moved_on = self.moved_on or (int(info["world"]), int(info["stage"])) != self.start
        self._visit(info)

    def _visit(self, info: Mapping[str, Any]) -> None:
        if "y_pos" in info:  # every step's info has it; the placeholder before the first reset does not
            self.cells.add((int(info["x_pos"]) // CELL_PX, int(info["y_pos"]) // CELL_PX))

    def metrics(self) -> dict[str, float]:
        return {"x_pos_max": float(self.x_pos_max), "flag": float(self.flag),
                "level_finished": float(self.flag or self.moved_on), "raw_return": float(self.raw_return),
                "cells_visited": float(len(self.cells))}


class MarioEnv(gymnasium.Env):
    """Super Mario Bros with frame skip + max-pool, luminance, resize and frame stacking.

    Observation: uint8 (frame_stack * channels, size, size), channel-first, oldest frame first.
    Reward: the game's own (x progress, clock, -25 on death), summed over the skipped frames.
    Info: coins, flag_get, life, score, stage, status, time, world, x_pos, y_pos as Python values,
    plus ``died``; on the step that ends an episode also ``episode_metrics``.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, config: MarioConfig | None = None, render_mode: str | None = None):
        config = config if config is not None else MarioConfig()
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', not {render_mode!r}")
        compat.apply()
        self.config = config
        self.render_mode = render_mode
        self.metadata = {**type(self).metadata, "render_fps": 60 // config.frame_skip or 1}
        self._codes, meanings = action_set(config.actions)
        self.action_space = spaces.Discrete(len(self._codes))
        self._levels = config.levels
        self._emulators: dict[tuple[int, int] | None, _Emulator] = {}
        self._emu = self._emulator(self._levels[0] if self._levels else None)
        self._pipeline = FramePipeline(SCREEN_HEIGHT, SCREEN_WIDTH, self._emu.channels, self._emu.rgb_index,
                                       config.grayscale, config.resize, config.interpolation)
        channels, height, width = self._pipeline.out_shape
        self._frame = np.zeros((channels, height, width), dtype=np.uint8)
        self._stack = np.zeros((channels * config.frame_stack, height, width), dtype=np.uint8)
        self._pooled = np.empty((SCREEN_HEIGHT, SCREEN_WIDTH, self._emu.channels), dtype=np.uint8)
        self._pool_at = config.frame_skip - 2 if config.max_pool and config.frame_skip > 1 else -1
        self.observation_space = spaces.Box(0, 255, self._stack.shape, dtype=np.uint8)
        self.rlf_metadata = {"frames_per_step": config.frame_skip, "action_meanings": meanings}
        self._stats = EpisodeStats()
        self._steps = 0
        self._lives = 2
        self._continue_game = False
        self._closed = False

    def _emulator(self, level: tuple[int, int] | None) -> _Emulator:
        emulator = self._emulators.get(level)
        if emulator is None:
            emulator = self._emulators[level] = _Emulator(self.config.rom, level)
        return emulator

    def _draw_level(self) -> tuple[int, int] | None:
        levels = self._levels
        if not levels:
            return None  # full game: the emulator starts at 1-1
        if len(levels) == 1:
            return levels[0]
        return levels[int(self.np_random.integers(len(levels)))]

    # -- Gymnasium API ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if not (self._continue_game and seed is None):
            self._emu = self._emulator(self._draw_level())
            self._emu.env.reset()
            noops = int(self.np_random.integers(0, self.config.noop_max + 1)) if self.config.noop_max else 0
            for _ in range(noops):
                if self._emu.env.step(0)[2]:  # cannot happen in the first seconds of a level; stay safe
                    self._emu.env.reset()
        # else: episodic_life after a lost life: the game goes on from where it is
        self._continue_game = False
        info = python_info(self._emu.info())
        info["died"] = False
        self._lives = lives_left(info["life"])
        self._stats.reset(info)
        self._steps = 0
        frame = self._pipeline(self._emu.frame(), self._frame)
        channels = frame.shape[0]
        for start in range(0, self._stack.shape[0], channels):
            self._stack[start:start + channels] = frame
        return self._stack.copy(), info

    def step(self, action):
        emulator = self._emu
        game = emulator.env
        code = self._codes[int(action)]
        last = self.config.frame_skip - 1
        reward = 0.0
        for i in range(last + 1):
            _, frame_reward, done, raw_info = game.step(code)
            reward += frame_reward
            if done or i == last:
                break
            if i == self._pool_at:
                np.copyto(self._pooled, emulator.frame())
        pixels = emulator.frame()
        if i == last and self._pool_at >= 0:
            pixels = np.maximum(self._pooled, pixels, out=self._pooled)
        frame = self._pipeline(pixels, self._frame)
        channels = frame.shape[0]
        stack = self._stack
        stack[:-channels] = stack[channels:]
        stack[-channels:] = frame

        info = python_info(raw_info)
        lives = lives_left(info["life"])
        if self.config.full_game:
            died = lives < self._lives
            terminated = done or (self.config.episodic_life and died)
        else:  # a single level ends at the flag or at the first death
            died = done and not info["flag_get"]
            terminated = done
        self._lives = lives
        info["died"] = died
        self._steps += 1
        limit = self.config.max_episode_steps
        truncated = not terminated and limit is not None and self._steps >= limit
        self._stats.update(info, reward)
        if terminated or truncated:
            info[EPISODE_METRICS] = self._stats.metrics()
            self._continue_game = terminated and not done
        return stack.copy(), reward, terminated, truncated, info

    def render(self):
        if self.render_mode == "rgb_array":
            return self._emu.rgb()
        return None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for emulator in self._emulators.values():
            emulator.close()
        self._emulators.clear()


def make_mario(config: MarioConfig | Mapping[str, Any] | None = None, render_mode: str | None = None
               ) -> gymnasium.Env:
    """The ``mario`` environment rlf builds: ``MarioEnv``, wrapped in reward shaping or a sparse reward when set."""
    if config is None:
        config = MarioConfig()
    elif not isinstance(config, MarioConfig):
        config = MarioConfig.model_validate(dict(config))
    env: gymnasium.Env = MarioEnv(config, render_mode=render_mode)
    if config.reward_shaping:
        from .shaping import MarioRewardShaping

        env = MarioRewardShaping(env, score_divisor=config.shaping_score_divisor,
                                 flag_bonus=config.shaping_flag_bonus,
                                 death_penalty=config.shaping_death_penalty, scale=config.shaping_scale)
    elif config.extrinsic_reward != "game":
        from .shaping import MarioSparseReward

        env = MarioSparseReward(env, flag_only=config.extrinsic_reward == "flag")
    return env


# Subprocess workers start from a copy of one Mario env their fork server builds (rlf.envs.fork_template):
# building one plays the emulator through the title screen (~220 frames, a quarter of a CPU second
# per worker), and a forked nes-py emulator is a working one (plain memory, no threads or OS handles).
make_mario.fork_template = True  # type: ignore[attr-defined]

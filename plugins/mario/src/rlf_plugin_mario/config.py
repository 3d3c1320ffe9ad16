"""The validated configuration of the ``mario`` environment (``--set env.<field>=...``)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from rlf import EnvConfig

ActionSet = Literal["RIGHT_ONLY", "SIMPLE_MOVEMENT", "COMPLEX_MOVEMENT"]
RomVersion = Literal["standard", "downsample", "pixel", "rectangle"]
ExtrinsicReward = Literal["game", "flag", "none"]

_STAGE = re.compile(r"^([1-8])-([1-4])$")


class MarioConfig(EnvConfig):
    """Super Mario Bros on nes-py, with the standard Atari-style preprocessing on top."""

    world: int = Field(1, ge=1, le=8, description="World of the level to play (1-8).")
    stage: int = Field(1, ge=1, le=4, description="Stage within the world (1-4).")
    random_stages: bool = Field(
        False, description="Draw the level at every reset (from `stages`, or all 32) instead of world-stage.")
    stages: list[str] = Field(
        default_factory=list, max_length=32,
        description='With random_stages: the levels to draw from, e.g. ["1-1", "1-2"] (empty = all 32).')
    full_game: bool = Field(
        False, description="Play the whole game from 1-1 with its lives; an episode ends at game over.")
    rom: RomVersion = Field(
        "standard", description="ROM version: standard, downsample, pixel or rectangle (simplified graphics).")
    actions: ActionSet = Field(
        "SIMPLE_MOVEMENT", description="Action set: RIGHT_ONLY (5), SIMPLE_MOVEMENT (7) or COMPLEX_MOVEMENT (12).")
    frame_skip: int = Field(4, ge=1, le=16, description="Emulated frames per agent step (the action repeats).")
    max_pool: bool = Field(True, description="Observe the pixel-wise max of the last two skipped frames (flicker).")
    grayscale: bool = Field(True, description="Luminance frames (1 channel) instead of RGB (3 channels).")
    resize: int = Field(84, ge=0, le=240, description="Square side the frame is resized to (0 = native 240x256).")
    interpolation: Literal["area", "nearest"] = Field(
        "area", description="Resize by averaging covered pixels (area) or by picking one (nearest, cheaper).")
    frame_stack: int = Field(4, ge=1, le=16, description="Most recent frames stacked along the channel axis.")
    noop_max: int = Field(
        30, ge=0, le=600,
        description="At reset, wait a seeded random 0..noop_max emulated frames (0 = identical starts).")
    episodic_life: bool = Field(
        False, description="full_game only: losing a life ends the episode for learning; the game goes on.")
    max_episode_steps: int | None = Field(
        None, ge=1, le=10_000_000, description="Truncate an episode after this many agent steps (none = no limit).")
    extrinsic_reward: ExtrinsicReward = Field(
        "game", description="What the learner is paid: game (the game's reward), flag (1 on reaching the flag, "
                            "else 0: sparse) or none (always 0: curiosity only); raw_return is still reported.")
    reward_shaping: bool = Field(
        False, description="Shape the reward (score, flag bonus, death penalty, scale); raw return still reported.")
    shaping_score_divisor: float = Field(
        40.0, gt=0.0, le=1e6, description="Shaping: in-game score gained is divided by this and added.")
    shaping_flag_bonus: float = Field(
        50.0, ge=0.0, le=1e6, description="Shaping: bonus on the step Mario reaches the flag (or the axe).")
    shaping_death_penalty: float = Field(
        50.0, ge=0.0, le=1e6, description="Shaping: penalty on the step Mario dies or loses a life.")
    shaping_scale: float = Field(
        0.1, gt=0.0, le=1e3, description="Shaping: the shaped reward is multiplied by this at the end.")

    @field_validator("actions", mode="before")
    @classmethod
    def _upper_actions(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("stages")
    @classmethod
    def _stage_names(cls, value: list[str]) -> list[str]:
        bad = [name for name in value if not _STAGE.match(name)]
        if bad:
            raise ValueError(f"levels are written world-stage with world 1-8 and stage 1-4, e.g. 1-1; got {bad}")
        if len(set(value)) != len(value):
            raise ValueError("each level may be listed once")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> MarioConfig:
        if self.random_stages and self.full_game:
            raise ValueError("random_stages and full_game exclude each other")
        if self.stages and not self.random_stages:
            raise ValueError("stages lists the levels random_stages draws from; set random_stages=true too")
        if self.full_game and (self.world, self.stage) != (1, 1):
            raise ValueError("full_game always starts at 1-1; leave world and stage at 1")
        if self.reward_shaping and self.extrinsic_reward != "game":
            raise ValueError("reward_shaping shapes the game's reward; it needs extrinsic_reward=game")
        if self.episodic_life and not self.full_game:
            raise ValueError("episodic_life needs full_game=true (a single level already ends at the first death)")
        return self

    @property
    def levels(self) -> list[tuple[int, int]]:
        """The (world, stage) pairs this config plays; full_game has none fixed."""
        if self.full_game:
            return []
        if self.random_stages:
            names = self.stages or [f"{w}-{s}" for w in range(1, 9) for s in range(1, 5)]
            return [(int(n[0]), int(n[2])) for n in names]
        return [(self.world, self.stage)]

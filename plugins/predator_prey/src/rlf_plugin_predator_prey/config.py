"""The environment's validated config, and the named scenarios that fill it.

A scenario is a preset of field values applied *under* what the user set: ``scenario="grid-3v3"``
with ``size=12`` gives the 3v3 scenario on a 12x12 grid. Presets are applied when the config is
built (``model_validate``); assigning ``scenario`` on an existing config object changes only the name.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from rlf import EnvConfig, StrictModel

Scenario = Literal["custom", "chase-1v1", "grid-3v3", "sparse-10x10"]
Learners = Literal["predators", "prey", "all"]
OpponentPolicy = Literal["random", "stay", "flee", "chase"]
ObservationMode = Literal["relative", "local"]

SCENARIOS: dict[str, dict[str, Any]] = {
    "custom": {},
    # A small fast chase: the predator moves two cells per decision, the prey one.
    "chase-1v1": {
        "size": 5, "n_predators": 1, "n_prey": 1, "obstacle_share": 0.0, "capture_threshold": 1,
        "max_steps": 50, "predator_speed": 2, "prey_speed": 1,
    },
    # Teams on a 10x10 grid with 15 % obstacles; every prey must be caught.
    "grid-3v3": {
        "size": 10, "n_predators": 3, "n_prey": 3, "obstacle_share": 0.15, "capture_threshold": 3,
        "max_steps": 200, "predator_speed": 1, "prey_speed": 1, "allow_same_role_sharing": False,
        "obs_opponents": 1, "obs_teammates": 1, "obs_blocked": True,
    },
    # The learning benchmark: 1v1 at equal speed on an open 10x10 grid, agents start far apart.
    # A random predator rarely catches the random prey in 100 decisions; a learned chaser nearly always.
    "sparse-10x10": {
        "size": 10, "n_predators": 1, "n_prey": 1, "obstacle_share": 0.0, "capture_threshold": 1,
        "max_steps": 100, "predator_speed": 1, "prey_speed": 1, "min_start_distance": 10,
    },
}


class RewardConfig(StrictModel):
    """Base reward weights, applied by ``step()`` itself (the only reward path)."""

    capture: float = Field(100.0, ge=-1e6, le=1e6,
                           description="To each predator on a cell where prey was captured this step (once per step).")
    step: float = Field(-5.0, ge=-1e6, le=1e6, description="To every predator on every step (the step cost).")
    captured: float = Field(-100.0, ge=-1e6, le=1e6, description="To each prey on the step it is captured.")
    prey_step: float = Field(0.0, ge=-1e6, le=1e6,
                             description="To every prey still free after a step (a survival bonus; 0 = none).")


class PredatorPreyConfig(EnvConfig):
    """Predators and prey on a square grid with obstacles (PettingZoo parallel env)."""

    scenario: Scenario = Field("custom", description="Preset filling every field you do not set (custom = none).")
    size: int = Field(5, ge=2, le=64, description="Side of the square grid, in cells.")
    n_predators: int = Field(1, ge=1, le=16, description="Number of predators.")
    n_prey: int = Field(1, ge=1, le=16, description="Number of prey.")
    obstacle_share: float = Field(0.0, ge=0.0, le=0.5,
                                  description="Share of all cells holding an obstacle, redrawn every episode.")
    connected_layout: bool = Field(
        True, description="Lay obstacles so that every agent can reach every other (see README).")
    min_start_distance: int = Field(
        0, ge=0, le=126, description="Least Manhattan distance between any predator and any prey at reset.")
    capture_threshold: int = Field(1, ge=1, le=16,
                                   description="Captured prey that end the episode (terminated for everyone).")
    max_steps: int = Field(100, ge=1, le=1_000_000,
                           description="Decisions per episode before truncation (not sub-steps of fast agents).")
    predator_speed: int = Field(1, ge=1, le=8, description="Cells a predator moves per decision.")
    prey_speed: int = Field(1, ge=1, le=8, description="Cells a prey moves per decision.")
    allow_same_role_sharing: bool = Field(
        True, description="Agents of one role may share a cell; if false, colliding moves are cancelled.")
    learners: Learners = Field("predators", description="Which team the learning algorithm controls.")
    opponent_policy: OpponentPolicy = Field(
        "random", description="Scripted policy of the team that does not learn (unused when learners=all).")
    opponent_noise: float = Field(0.0, ge=0.0, le=1.0,
                                  description="Chance a scripted agent takes a uniformly random action instead.")
    observation: ObservationMode = Field(
        "relative", description="relative: offsets to the nearest agents; local: a square view plus the offsets.")
    obs_position: bool = Field(False, description="Observation starts with the agent's own (x, y).")
    obs_opponents: int = Field(1, ge=0, le=16, description="Nearest opponents whose (dx, dy) are observed.")
    obs_teammates: int = Field(0, ge=0, le=15, description="Nearest teammates whose (dx, dy) are observed.")
    obs_blocked: bool = Field(False, description="Observation ends with 4 flags: move right/up/left/down is blocked.")
    offset_clip: int | None = Field(None, ge=1, le=63,
                                    description="Clip observed offsets to [-clip, clip] (None = size - 1, no clipping).")
    view_radius: int = Field(2, ge=1, le=7, description="local mode: the view is (2r+1)^2 cells centred on the agent.")
    rewards: RewardConfig = Field(default_factory=RewardConfig, description="Base reward weights.")

    @model_validator(mode="before")
    @classmethod
    def _apply_scenario(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        preset = SCENARIOS.get(data.get("scenario", "custom"))
        if preset is None:  # an unknown name: the Literal check reports it
            return data
        return {**preset, **data}

    @model_validator(mode="after")
    def _check_combinations(self) -> PredatorPreyConfig:
        cells = self.size * self.size
        agents = self.n_predators + self.n_prey
        if agents + self.n_obstacles > cells:
            raise ValueError(
                f"{self.n_predators} predators + {self.n_prey} prey + {self.n_obstacles} obstacles "
                f"(obstacle_share {self.obstacle_share}) need more than the {cells} cells of a "
                f"{self.size}x{self.size} grid; enlarge size or lower the counts")
        if self.capture_threshold > self.n_prey:
            raise ValueError(f"capture_threshold {self.capture_threshold} is above n_prey {self.n_prey}: "
                             "the episode could never terminate")
        roles = self.learning_roles
        opponents = max(self.n_prey if r == "predator" else self.n_predators for r in roles)
        teammates = max((self.n_predators if r == "predator" else self.n_prey) - 1 for r in roles)
        if self.obs_opponents > opponents:
            raise ValueError(f"obs_opponents {self.obs_opponents} is more than the {opponents} opponent(s) "
                             "a learning agent has")
        if self.obs_teammates > teammates:
            raise ValueError(f"obs_teammates {self.obs_teammates} is more than the {teammates} teammate(s) "
                             "a learning agent has")
        if self.observation == "relative" and not (self.obs_position or self.obs_opponents or self.obs_teammates
                                                   or self.obs_blocked):
            raise ValueError("the relative observation is empty: set obs_opponents >= 1 (or another obs_ field)")
        if self.min_start_distance > 2 * (self.size - 1):
            raise ValueError(f"min_start_distance {self.min_start_distance} exceeds the largest distance "
                             f"{2 * (self.size - 1)} on a {self.size}x{self.size} grid")
        return self

    @property
    def n_obstacles(self) -> int:
        """Obstacles placed each episode: round(obstacle_share * size^2)."""
        return int(self.obstacle_share * self.size * self.size + 0.5)

    @property
    def learning_roles(self) -> tuple[str, ...]:
        return {"predators": ("predator",), "prey": ("prey",), "all": ("predator", "prey")}[self.learners]

    @property
    def clip(self) -> int:
        return self.size - 1 if self.offset_clip is None else min(self.offset_clip, self.size - 1)

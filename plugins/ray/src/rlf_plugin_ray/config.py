"""The ``[collector]`` settings of ``vector = "ray"``. Imports no Ray: discovery reads this model."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from rlf import StrictModel

PINNED_RAY = "2.60.0"
"""The Ray version pyproject.toml pins and the rlf image holds: Ray refuses a driver of another version,
so the trainer and every node run this one (a test checks the three agree)."""

_ADDRESS = re.compile(r"^(local|auto|ray://\S+|[\w.-]+:\d+)$")


class RayCollectorConfig(StrictModel):
    """Where the env actors run and how many envs each one steps."""

    address: str | None = Field(
        None,
        description="local: a private Ray instance for this run; auto: the running cluster this machine "
                    "belongs to; ray://HOST:10001: a remote cluster through Ray Client; HOST:PORT: a cluster's "
                    "GCS. Unset: $RAY_ADDRESS if set, else local.")
    envs_per_actor: int | None = Field(
        None, ge=1, le=1024,
        description="Envs one actor steps, one after the other, per call. Unset: as few per actor as the "
                    "cluster's free CPUs allow (this machine's with address=local), so that no actor waits for a "
                    "core: 8 envs on 2 cores are 2 actors of 4, on 8 free CPUs 8 actors of 1. Each call costs Ray "
                    "CPU of its own, so more envs per actor cost less per env step; 1 gives every env its own "
                    "process.")
    parts: int | None = Field(
        None, ge=1, le=1024,
        description="Groups of actors the on-policy strategy acts on in turn while the others step (unset: "
                    "as vector=async splits this env, so both collect the same rollouts).")
    actor_cpus: float = Field(1.0, ge=0.0, le=1024.0, description="CPUs Ray reserves for each env actor.")
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources each actor needs, e.g. {env_node = 1} to place envs only on nodes "
                    "started with --resources='{\"env_node\": 16}'.")
    scheduling: Literal["default", "spread"] = Field(
        "default", description="spread: place the actors on as many nodes as possible; default: Ray's choice.")
    max_restarts: int = Field(
        3, ge=-1,
        description="Times Ray restarts a dead actor (its envs start fresh episodes); -1: without limit. "
                    "Past it, the run stops with a checkpoint.")
    connect_timeout_s: float = Field(
        30.0, gt=0.0, le=3600.0,
        description="With a HOST:PORT or ray:// address: seconds to wait for a connection that gets no answer at "
                    "all (a firewall that drops it, a host still booting) before the run stops with one line; a "
                    "refused connection or a listener that is not Ray stops it at once.")
    restart_timeout_s: float = Field(
        300.0, gt=0.0,
        description="Seconds to wait for a restarted actor (e.g. for a node with free resources to join) "
                    "before the run stops.")
    niceness: int = Field(
        19, ge=0, le=19,
        description="CPU priority added to the actor processes, as vector=async does for its env workers, "
                    "so the learner on the same machine is never queued behind them.")
    local_cpus: int | None = Field(
        None, ge=1,
        description="With address=local: CPUs the private Ray instance offers (unset: this machine's, or "
                    "what the actors request if more).")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        if value is not None and not _ADDRESS.match(value):
            raise ValueError("must be local, auto, ray://HOST:PORT or HOST:PORT")
        return value

"""Settings of the ``actor-learner`` strategy family and of APPO on it. pydantic only: ``rlf list`` and
``rlf config`` import this module, so it must not pull in torch."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from rlf_plugin_ppo.config import PPOConfig

import rlf


class ActorLearnerConfig(rlf.AlgorithmConfig):
    """What the ``actor-learner`` strategy reads: how many actors, how long their chunks are, how stale
    a chunk may be, and how many lost actors are replaced."""

    actors: int = Field(
        2, ge=1, le=64,
        description="Actor processes (or Ray actors with vector='ray'); run.num_envs is split evenly among them.")
    rollout_steps: int = Field(
        32, ge=1, le=100_000,
        description="T: vector steps of each actor's envs per chunk (one chunk = T x its envs samples, one update).")
    max_staleness: int = Field(
        32, ge=1, le=1_000_000,
        description="Chunks collected with weights more than this many learner updates old are dropped unlearned "
                    "(counted as chunks_dropped).")
    actor_restarts: int = Field(
        2, ge=0, le=10_000,
        description="Lost actors replaced by new ones in the whole run, resumes included; past it the run "
                    "continues with the actors left, and stops (with a checkpoint) once none is left.")

    def check_run(self, run) -> str | None:
        if run.num_envs % self.actors:
            return (f"run.num_envs={run.num_envs} does not split evenly among algo.actors={self.actors}; "
                    f"use a multiple of {self.actors} envs or another actor count")
        return None


class APPOConfig(PPOConfig, ActorLearnerConfig):
    """Asynchronous PPO: PPO's clipped surrogate on the ratio to the behaviour policy, with V-trace
    targets and advantages (Espeholt et al. 2018) correcting for the actors' stale weights."""

    # PPOConfig comes first in the MRO: restated so that the chunk length (not PPO's rollout) is what
    # `rlf config appo` documents and defaults to
    rollout_steps: int = Field(
        32, ge=1, le=100_000,
        description="T: vector steps of each actor's envs per chunk (one chunk = T x its envs samples, one update).")
    gae_lambda: float = Field(
        1.0, ge=0.0, le=1.0,
        description="V-trace's lambda: scales the trace coefficients c (1 = the paper's V-trace).")
    rho_bar: float = Field(
        1.0, gt=0.0, le=1000.0,
        description="V-trace's rho-bar: truncation of the importance weight in the temporal differences.")
    c_bar: float = Field(
        1.0, gt=0.0, le=1000.0,
        description="V-trace's c-bar: truncation of the trace coefficients (c-bar <= rho-bar, as in the paper).")
    advantage_window: int = Field(
        0, ge=0, le=100_000_000,
        description="With normalize_advantages: samples over which the advantages' mean and scale are averaged "
                    "(running, across chunks; e.g. PPO's rollout size). 0: each chunk's own, which for small "
                    "chunks makes a few steps' noise unit-sized.")
    epochs: int = Field(2, ge=1, le=100, description="Passes over each chunk per update.")
    minibatches: int = Field(1, ge=1, le=1024, description="Minibatches each chunk is split into per epoch.")
    lr: float = Field(5e-4, gt=0.0, le=1.0, description="Adam learning rate at the start of the run.")
    anneal_lr: bool = Field(
        False, description="Decay the learning rate linearly to 0 over schedule_steps (or run.steps).")
    backend: Literal["torch", "numpy"] = Field(
        "torch", description="How the actors act: numpy runs small MLPs through numpy views of the weights (cheaper "
                             "per call on the CPU); the update is always torch.")

    @model_validator(mode="after")
    def _appo_only(self):
        if self.value_clip > 0:
            raise ValueError("algo.value_clip is PPO's: APPO regresses on V-trace targets; set algo.value_clip=0")
        if self.target_kl > 0:
            raise ValueError("algo.target_kl is PPO's: APPO has no early stop; set algo.target_kl=0")
        if self.memory != "none":
            raise ValueError(f"algo.memory={self.memory!r} is PPO's: APPO's V-trace update reads single steps, not "
                             "sequences; set algo.memory='none' or train ppo")
        if self.c_bar > self.rho_bar:
            raise ValueError(f"algo.c_bar ({self.c_bar:g}) must not exceed algo.rho_bar ({self.rho_bar:g}): "
                             "V-trace assumes c-bar <= rho-bar")
        return self

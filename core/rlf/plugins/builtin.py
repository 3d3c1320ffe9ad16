"""The core's default plugin, named ``rlf``: what the core ships is registered through the same hooks a
third-party plugin implements. Builders are named by ``"module:function"`` strings, so discovery never
imports Gymnasium's vector machinery, the training loop or a logger's dependencies."""

from __future__ import annotations

from rlf.config import AsyncCollectorConfig, OffPolicyConfig, OnPolicyConfig
from rlf.envs.gym import GymEnvConfig, make_gym_env
from rlf.plugins.hookspecs import RegisterCollector, RegisterLogger, RegisterStrategy, hookimpl
from rlf.plugins.specs import API_VERSION

RLF_API_VERSION = API_VERSION


@hookimpl
def rlf_register_environments(register):
    register("gym:", build_env=make_gym_env, config=GymEnvConfig)


@hookimpl
def rlf_register_strategies(register: RegisterStrategy):
    register("on-policy", strategy="rlf.training.overlap:on_policy_strategy", config=OnPolicyConfig,
             description="vectorized rollouts with GAE, one update per rollout")
    register("off-policy", strategy="rlf.training.off_policy:OffPolicyStrategy", config=OffPolicyConfig,
             description="every step's transitions to the learner, epsilon schedules, optional actor processes")


@hookimpl
def rlf_register_collectors(register: RegisterCollector):
    register("sync", build_collector="rlf.envs:build_sync_collector",
             description="every env copy in this process, stepped in turn")
    register("async", build_collector="rlf.envs:build_async_collector", config=AsyncCollectorConfig,
             description="one subprocess per env copy (shared memory), in two groups that step in turn")


@hookimpl
def rlf_register_loggers(register: RegisterLogger):
    register("csv", build_logger="rlf.logging.loggers:build_csv",
             description="metrics.csv, episodes.csv and eval.csv in the run directory")
    register("tensorboard", build_logger="rlf.logging.loggers:build_tensorboard",
             description="TensorBoard event files in <run>/tensorboard (tensorboardX)")
    register("progress", build_logger="rlf.logging.loggers:build_progress",
             description="console progress bar (off with run.progress = false)")

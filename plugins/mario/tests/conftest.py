"""Shared helpers for the Mario plugin's tests. Every env here is a real nes-py emulator."""

from __future__ import annotations

import os

import numpy as np
import pytest
from rlf_plugin_mario.config import MarioConfig
from rlf_plugin_mario.env import make_mario

# The plugin's tests run as if only the core, this plugin and the random baseline were installed
# (other plugins in a shared environment would only slow discovery down, or break it).
os.environ.setdefault("RLF_LOAD_PLUGINS", "mario,random")

NUMPY_2 = int(np.__version__.split(".")[0]) >= 2

# SIMPLE_MOVEMENT indices
NOOP, RIGHT, RIGHT_JUMP, RIGHT_RUN = 0, 1, 2, 3


def play(env, actions):
    """Step through ``actions``; stop early at an episode end. Returns the list of step tuples."""
    steps = []
    for action in actions:
        steps.append(env.step(action))
        if steps[-1][2] or steps[-1][3]:
            break
    return steps


def run_episode(env, action, limit=3000):
    """Repeat ``action`` until the episode ends: (total reward, steps, last info, terminated, truncated)."""
    total, last = 0.0, None
    for n in range(1, limit + 1):
        _, reward, terminated, truncated, last = env.step(action)
        total += reward
        if terminated or truncated:
            return total, n, last, terminated, truncated
    raise AssertionError(f"no episode end within {limit} steps")


@pytest.fixture
def make():
    """``make(**config)`` builds envs and closes them after the test."""
    built = []

    def factory(render_mode=None, **fields):
        env = make_mario(MarioConfig(**fields), render_mode=render_mode)
        built.append(env)
        return env

    yield factory
    for env in built:
        env.close()


@pytest.fixture(scope="module")
def default_env():
    env = make_mario(MarioConfig(noop_max=0))
    yield env
    env.close()

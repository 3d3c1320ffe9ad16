"""The frame-deduplicating replay: stacks come back exactly as they went in, each frame is stored
once, and a checkpoint round trip (also into another capacity) keeps what it should."""

from __future__ import annotations

import numpy as np
import pytest
from rlf_plugin_dqn.replay import FrameReplay

from rlf.storage import checkpoint

STACK, SIDE = 4, 6


class StackedEnvs:
    """N fake envs emitting frame stacks the way a FrameStack wrapper does: each step shifts in one new
    random frame; a reset repeats the first frame. Every transition gets a unique action id."""

    def __init__(self, num_envs: int, episode_length: int, rng: np.random.Generator, channels_last=False):
        self.n, self.length, self.rng, self.channels_last = num_envs, episode_length, rng, channels_last
        self.frames = [self._reset() for _ in range(num_envs)]
        self.t = np.zeros(num_envs, dtype=int)
        self.next_id = 0

    def _frame(self):
        return self.rng.integers(0, 256, size=(SIDE, SIDE), dtype=np.uint8)

    def _reset(self):
        return [self._frame()] * STACK

    def _obs(self, frames):
        stack = np.stack(frames)
        return np.moveaxis(stack, 0, -1) if self.channels_last else stack

    def step(self):
        obs = np.stack([self._obs(f) for f in self.frames])
        next_frames = [f[1:] + [self._frame()] for f in self.frames]
        next_obs = np.stack([self._obs(f) for f in next_frames])
        self.t += 1
        ended = self.t >= self.length
        actions = np.arange(self.next_id, self.next_id + self.n)
        self.next_id += self.n
        for i in range(self.n):
            self.frames[i] = self._reset() if ended[i] else next_frames[i]
            if ended[i]:
                self.t[i] = 0
        return obs, actions, self.rng.random(self.n).astype(np.float32), next_obs, ended.astype(np.float32)


def fill(buffer: FrameReplay, envs: StackedEnvs, steps: int, alive_share: float = 1.0):
    truth = {}
    for _ in range(steps):
        obs, actions, rewards, next_obs, terminated = envs.step()
        rows = np.flatnonzero(envs.rng.random(envs.n) < alive_share) if alive_share < 1 else np.arange(envs.n)
        buffer.add(obs[rows], actions[rows], rewards[rows], next_obs[rows], terminated[rows], env_ids=rows)
        for r in rows:
            truth[int(actions[r])] = (obs[r], rewards[r], next_obs[r], terminated[r])
    return truth


def assert_matches(sample, truth):
    for i, action in enumerate(sample["actions"]):
        obs, reward, next_obs, terminated = truth[int(action)]
        np.testing.assert_array_equal(sample["obs"][i], obs)
        np.testing.assert_array_equal(sample["next_obs"][i], next_obs)
        assert sample["rewards"][i] == reward and sample["terminated"][i] == terminated


@pytest.mark.parametrize("channels_last", [False, True])
def test_stacks_are_rebuilt_exactly_across_envs_and_episode_starts(channels_last):
    rng = np.random.default_rng(0)
    envs = StackedEnvs(3, episode_length=7, rng=rng, channels_last=channels_last)
    shape = (SIDE, SIDE, STACK) if channels_last else (STACK, SIDE, SIDE)
    buffer = FrameReplay(1000, shape, stack_axis=-1 if channels_last else 0)
    truth = fill(buffer, envs, 100)
    assert len(buffer) == 300
    assert_matches(buffer.sample(600, rng), truth)


def test_each_frame_is_stored_once():
    rng = np.random.default_rng(1)
    envs = StackedEnvs(2, episode_length=50, rng=rng)
    buffer = FrameReplay(10_000, (STACK, SIDE, SIDE))
    truth = fill(buffer, envs, 1000)
    transitions, episodes = 2000, 2000 // 50
    # one new frame per step, plus the one (repeated) first frame of each episode
    assert buffer.frames_written == transitions + episodes
    assert_matches(buffer.sample(500, rng), truth)


def test_rows_of_absent_agents_and_unrelated_images_stay_correct():
    rng = np.random.default_rng(2)
    envs = StackedEnvs(4, episode_length=9, rng=rng)
    buffer = FrameReplay(5000, (STACK, SIDE, SIDE))
    truth = fill(buffer, envs, 200, alive_share=0.6)  # rows skipped at random break the chains
    # images that are no frame stack at all are stored whole, still correctly
    obs = rng.integers(0, 256, size=(5, STACK, SIDE, SIDE), dtype=np.uint8)
    next_obs = rng.integers(0, 256, size=(5, STACK, SIDE, SIDE), dtype=np.uint8)
    actions = np.arange(10**6, 10**6 + 5)
    buffer.add(obs, actions, np.ones(5, np.float32), next_obs, np.zeros(5, np.float32))
    truth.update({int(a): (obs[i], 1.0, next_obs[i], 0.0) for i, a in enumerate(actions)})
    assert_matches(buffer.sample(2000, rng), truth)


def test_a_full_ring_keeps_the_newest_transitions_and_never_serves_overwritten_frames():
    rng = np.random.default_rng(3)
    envs = StackedEnvs(2, episode_length=3, rng=rng)  # short episodes: many extra first frames
    buffer = FrameReplay(40, (STACK, SIDE, SIDE), frame_capacity=50)
    truth = fill(buffer, envs, 300)
    newest = set(range(600 - 40, 600))
    sample = buffer.sample(500, rng)
    assert set(sample["actions"].tolist()) <= newest
    assert 0 < len(buffer) <= 40
    assert_matches(sample, truth)


def test_checkpoint_round_trip_also_into_a_smaller_ring(tmp_path):
    rng = np.random.default_rng(4)
    envs = StackedEnvs(2, episode_length=11, rng=rng)
    buffer = FrameReplay(500, (STACK, SIDE, SIDE))
    truth = fill(buffer, envs, 400)  # wrapped: 800 transitions into 500 slots
    checkpoint.save(tmp_path / "replay.rlf", {"replay": buffer.state_dict()})
    state = checkpoint.load(tmp_path / "replay.rlf")["replay"]

    same = FrameReplay(500, (STACK, SIDE, SIDE))
    same.load_state_dict(state)
    assert len(same) == len(buffer)
    original, restored = buffer.sample(64, np.random.default_rng(9)), same.sample(64, np.random.default_rng(9))
    for key, value in original.items():  # same slots: the same draws give the same batch
        np.testing.assert_array_equal(value, restored[key])

    smaller = FrameReplay(100, (STACK, SIDE, SIDE))
    smaller.load_state_dict(state)
    assert len(smaller) == 100
    sample = smaller.sample(300, rng)
    assert sample["actions"].min() >= 800 - 100  # the newest hundred
    assert_matches(sample, truth)
    # and it keeps filling where it left off
    assert_matches(smaller.sample(300, rng), {**truth, **fill(smaller, envs, 20)})


def test_rejects_observations_it_cannot_store():
    buffer = FrameReplay(10, (STACK, SIDE, SIDE))
    with pytest.raises(ValueError, match="uint8"):
        buffer.add(np.zeros((1, STACK, SIDE, SIDE), np.float32), np.zeros(1), np.zeros(1),
                   np.zeros((1, STACK, SIDE, SIDE), np.float32), np.zeros(1))


def test_100k_mario_transitions_fit_in_one_and_a_half_gigabytes():
    # allocation is lazy, so this costs nothing; benchmarks/dqn.py measures the resident memory filled
    buffer = FrameReplay(100_000, (4, 84, 84))
    assert buffer.nbytes <= 1.5 * 2**30

import warnings

import gymnasium
import numpy as np
import pytest
from conftest import NOOP, RIGHT, RIGHT_JUMP, RIGHT_RUN, play, run_episode
from gymnasium.utils.env_checker import check_env
from rlf_plugin_mario.config import MarioConfig
from rlf_plugin_mario.env import EpisodeStats, MarioEnv, action_set, make_mario
from rlf_plugin_mario.preprocess import FramePipeline

INFO_TYPES = {"coins": int, "flag_get": bool, "life": int, "score": int, "stage": int, "status": str,
              "time": int, "world": int, "x_pos": int, "y_pos": int, "died": bool}
NO_SPEC = "environment not having a spec"  # check_env cannot re-make an env built without gymnasium.make


def checked(env):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    return [str(w.message) for w in caught if NO_SPEC not in str(w.message)]


def test_check_env_passes_with_preprocessing_and_rendering(make):
    env = make(render_mode="rgb_array")
    assert isinstance(env, MarioEnv)
    assert env.observation_space == gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert env.action_space == gymnasium.spaces.Discrete(7)
    assert checked(env) == []


def test_check_env_passes_with_reward_shaping(make):
    env = make(reward_shaping=True)
    assert isinstance(env.unwrapped, MarioEnv) and env is not env.unwrapped
    assert all("different from the unwrapped" in message for message in checked(env))


def test_observation_stack_and_info(default_env):
    obs, info = default_env.reset(seed=1)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8 and obs.flags.c_contiguous
    assert all((obs[i] == obs[0]).all() for i in range(4))  # reset fills the stack with the first frame
    assert {k: type(v) for k, v in info.items()} == INFO_TYPES
    assert (info["world"], info["stage"], info["life"], info["flag_get"]) == (1, 1, 2, False)
    previous = obs
    for action in (RIGHT, RIGHT, RIGHT_JUMP):
        obs, reward, terminated, truncated, info = default_env.step(action)
        assert type(reward) is float and terminated is False and truncated is False
        np.testing.assert_array_equal(obs[:-1], previous[1:])  # oldest frame first
        assert not np.shares_memory(obs, previous)
        previous = obs
    assert {k: type(v) for k, v in info.items()} == INFO_TYPES
    assert info["x_pos"] > 40  # moved right
    assert default_env.rlf_metadata["frames_per_step"] == 4


def test_frames_are_skipped_max_pooled_and_preprocessed_like_the_bare_emulator(default_env):
    from gym_super_mario_bros.smb_env import SuperMarioBrosEnv

    codes, _ = action_set("SIMPLE_MOVEMENT")
    bare = SuperMarioBrosEnv(rom_mode="vanilla", target=(1, 1))
    try:
        bare.reset()
        default_env.reset(seed=3)  # noop_max=0: the same start as the bare emulator
        pipeline = FramePipeline(240, 256, 3, (0, 1, 2))
        expected = np.empty((1, 84, 84), dtype=np.uint8)
        total = 0.0
        for action in [RIGHT] * 5 + [RIGHT_JUMP] * 6 + [RIGHT_RUN] * 5:
            frames, reward = [], 0.0
            for _ in range(4):
                screen, r, done, _ = bare.step(codes[action])
                frames.append(screen.copy())
                reward += r
            obs, got, *_ = default_env.step(action)
            pipeline(np.maximum(frames[-2], frames[-1]), expected)
            assert np.abs(obs[-1].astype(int) - expected[0]).max() <= 1  # BGRx vs RGB float rounding
            assert got == reward
            total += got
        assert total > 0
    finally:
        bare.close()


def test_seeding(make):
    def first_frames(env, seed, n=8):
        obs, _ = env.reset(seed=seed)
        return [obs] + [step[0] for step in play(env, [RIGHT] * n)]

    env, twin = make(noop_max=30), make(noop_max=30)
    same = first_frames(env, 11), first_frames(twin, 11)
    assert all((a == b).all() for a, b in zip(*same, strict=True))
    # different seeds wait different numbers of no-op frames: the enemies are elsewhere
    endings = {first_frames(env, seed)[-1].tobytes() for seed in range(6)}
    assert len(endings) > 1
    # without no-ops the NES is deterministic: every seed starts the same game
    fixed = make(noop_max=0)
    starts = {first_frames(fixed, seed, n=2)[-1].tobytes() for seed in range(3)}
    assert len(starts) == 1


def test_render_returns_a_positive_strided_copy_of_the_screen(make):
    env = make(render_mode="rgb_array", noop_max=0)
    env.reset(seed=0)
    play(env, [RIGHT] * 3)
    frame = env.render()
    assert frame.shape == (240, 256, 3) and frame.dtype == np.uint8 and frame.flags.c_contiguous
    assert all(s > 0 for s in frame.strides)
    np.testing.assert_array_equal(frame, env.unwrapped._emu.env.screen)
    frame[:] = 0
    assert env.render().any()
    assert make(noop_max=0).render() is None
    with pytest.raises(ValueError):
        MarioEnv(MarioConfig(), render_mode="human")


def test_death_ends_the_episode_with_metrics(default_env):
    default_env.reset(seed=0)
    total, steps, info, terminated, truncated = run_episode(default_env, RIGHT)
    assert terminated and not truncated and info["died"] and not info["flag_get"]
    metrics = info["episode_metrics"]
    assert set(metrics) == {"x_pos_max", "flag", "level_finished", "raw_return", "cells_visited"}
    assert all(type(v) is float for v in metrics.values())
    assert metrics["flag"] == 0.0 and metrics["level_finished"] == 0.0
    assert metrics["raw_return"] == pytest.approx(total)
    assert metrics["x_pos_max"] >= info["x_pos"] > 256
    # running right passes through every tile column between the start and the furthest x
    assert metrics["cells_visited"] >= (metrics["x_pos_max"] - 40) // 16
    # the next episode starts afresh
    _, info = default_env.reset()
    assert info["x_pos"] == 40 and "episode_metrics" not in info


def test_max_episode_steps_truncates(make):
    env = make(max_episode_steps=5, noop_max=0)
    env.reset(seed=0)
    total, steps, info, terminated, truncated = run_episode(env, RIGHT)
    assert (steps, terminated, truncated) == (5, False, True)
    assert info["episode_metrics"]["raw_return"] == pytest.approx(total) and not info["died"]


def test_full_game_with_episodic_life(make):
    env = make(full_game=True, episodic_life=True, noop_max=0)
    _, info = env.reset(seed=0)
    assert info["life"] == 2
    lives = []
    for _ in range(3):
        _, _, info, terminated, _ = run_episode(env, RIGHT)
        assert terminated and info["died"]
        lives.append(info["life"])
        _, info = env.reset()
    assert lives == [1, 0, 255]  # two lost lives, then game over
    assert info["life"] == 2  # a real reset after game over
    # without episodic life the episode runs to game over
    whole = make(full_game=True, noop_max=0)
    whole.reset(seed=0)
    _, steps, info, terminated, _ = run_episode(whole, RIGHT)
    assert terminated and info["life"] == 255 and steps > 100


def test_random_stages_draw_levels_from_the_seed(make):
    env = make(random_stages=True, stages=["1-1", "4-2"], noop_max=0)
    seen = set()
    for seed in range(6):
        _, info = env.reset(seed=seed)
        seen.add((info["world"], info["stage"]))
        obs, *_ = env.step(RIGHT)
    assert seen == {(1, 1), (4, 2)}
    again = make(random_stages=True, stages=["1-1", "4-2"], noop_max=0)
    assert [again.reset(seed=s)[1]["world"] for s in range(6)] == [env.reset(seed=s)[1]["world"] for s in range(6)]


def test_world_stage_roms_and_action_sets(make):
    env = make(world=3, stage=2, rom="rectangle", actions="COMPLEX_MOVEMENT", grayscale=False, frame_stack=2,
               resize=64, noop_max=0)
    obs, info = env.reset(seed=0)
    assert (info["world"], info["stage"]) == (3, 2)
    assert obs.shape == (6, 64, 64) and env.action_space.n == 12
    assert env.step(11)[0].shape == (6, 64, 64)
    assert [len(action_set(name)[0]) for name in ("RIGHT_ONLY", "SIMPLE_MOVEMENT", "COMPLEX_MOVEMENT")] == [5, 7, 12]
    native = make(rom="downsample", resize=0, frame_stack=1, frame_skip=1, max_pool=False, noop_max=0)
    assert native.reset(seed=0)[0].shape == (1, 240, 256)
    assert native.step(NOOP)[0].shape == (1, 240, 256)


def test_episode_stats_flag_and_level_change():
    stats = EpisodeStats()
    start = {"x_pos": 40, "world": 1, "stage": 2, "flag_get": False}
    stats.reset(start)
    stats.update({**start, "x_pos": 900}, 5.0)
    stats.update({**start, "x_pos": 300, "world": 4, "stage": 1}, -1.0)  # a warp pipe: next level, no flag
    assert stats.metrics() == {"x_pos_max": 900.0, "flag": 0.0, "level_finished": 1.0, "raw_return": 4.0,
                               "cells_visited": 0.0}  # these infos carry no y_pos
    stats.reset(start)
    stats.update({**start, "x_pos": 3100, "flag_get": True}, 15.0)
    assert stats.metrics() == {"x_pos_max": 3100.0, "flag": 1.0, "level_finished": 1.0, "raw_return": 15.0,
                               "cells_visited": 0.0}


def test_cells_visited_counts_distinct_tiles_of_one_episode():
    stats = EpisodeStats()
    start = {"x_pos": 40, "y_pos": 79, "world": 1, "stage": 1, "flag_get": False}
    stats.reset(start)  # tile (2, 4)
    for x, y in ((47, 79), (60, 79), (64, 79), (64, 100), (64, 79), (40, 79)):  # (2, 4) (3, 4) (4, 4) (4, 6)
        stats.update({**start, "x_pos": x, "y_pos": y}, 0.0)
    assert stats.metrics()["cells_visited"] == 4.0
    stats.reset(start)  # a new episode counts afresh
    assert stats.metrics()["cells_visited"] == 1.0


def test_make_mario_accepts_a_mapping_and_closes_twice():
    env = make_mario({"noop_max": 0, "frame_stack": 2})
    assert env.observation_space.shape == (2, 84, 84)
    env.close()
    env.close()

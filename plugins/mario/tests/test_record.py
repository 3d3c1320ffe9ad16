"""Recording the random agent on Mario through the core's evaluate(record=...)."""

import numpy as np
import pytest

import rlf


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("record") / "run"
    algo = rlf.make("random", "mario", overrides=[
        "steps=16", "num_envs=1", "vector=sync", "progress=false", f"run_dir='{run_dir}'",
        "env.max_episode_steps=24"])
    algo.train()
    return algo


def distinct(frames):
    return len({np.asarray(frame).tobytes() for frame in frames})


def test_record_gif(trained, tmp_path):
    from PIL import Image, ImageSequence

    path = tmp_path / "mario.gif"
    result = trained.evaluate(episodes=1, record=path)
    assert result["episodes"] == 1.0 and result["length"] == 24.0
    assert {"x_pos_max", "flag", "level_finished", "raw_return"} <= set(result)
    with Image.open(path) as gif:
        frames = [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(gif)]
    assert len(frames) >= 20 and frames[0].shape == (240, 256, 3)
    assert distinct(frames) >= 10


def test_record_mp4(trained, tmp_path):
    import imageio.v2 as imageio

    path = tmp_path / "mario.mp4"
    trained.evaluate(episodes=1, record=path)
    with imageio.get_reader(path) as reader:
        frames = list(reader.iter_data())  # list(reader) would trust an unknown length
    assert len(frames) == 25 and frames[0].shape == (240, 256, 3)  # the start frame, then one per step
    assert distinct(frames) >= 10

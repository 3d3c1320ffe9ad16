"""Writing evaluation videos: GIF through Pillow, MP4 through imageio's ffmpeg plugin."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlf.errors import ConfigError

GIF = {".gif"}
FFMPEG = {".mp4", ".webm", ".mkv"}


def check_video_path(path: Path) -> None:
    """Refuse, in one line, a video that ``write_video`` could not write: an unknown format, a missing
    encoder, or a folder that cannot exist. An evaluation calls this before it plays, because the
    frames of a long one (ten Mario episodes are minutes) are lost when the write fails at the end."""
    suffix = path.suffix.lower()
    if suffix in GIF:
        try:
            import PIL.Image  # noqa: F401
        except ImportError:
            raise ConfigError("writing a GIF needs Pillow: pip install 'rlf[video]'") from None
    elif suffix in FFMPEG:
        try:
            import imageio.v2  # noqa: F401
            import imageio_ffmpeg  # noqa: F401 - the encoder imageio uses for these formats
        except ImportError:
            raise ConfigError(f"writing {suffix} needs imageio and imageio-ffmpeg: pip install 'rlf[video]' "
                              "(or record a .gif)") from None
    else:
        raise ConfigError(f"cannot record to {path.name}: use a .mp4 or .gif file name")
    if path.is_dir():
        raise ConfigError(f"cannot record to {path}: it is a folder; give a file name such as {path / 'play.gif'}")
    for folder in (path.parent, *path.parent.parents):
        if folder.exists():
            if not folder.is_dir():
                raise ConfigError(f"cannot record to {path}: {folder} is a file, not a folder")
            break


def write_video(path: Path, frames: list[np.ndarray], fps: int = 30) -> Path:
    """Write ``frames`` to ``path`` (format from its suffix). The video is written beside it under a
    temporary name and moved into place whole, so a failed write leaves an earlier video there intact."""
    check_video_path(path)
    if not frames:
        raise ConfigError("no frames were rendered; nothing to record")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.stem}.partial{path.suffix}")  # the suffix names the format to the writer
    try:
        _encode(partial, frames, fps)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def _encode(path: Path, frames: list[np.ndarray], fps: int) -> None:
    if path.suffix.lower() in GIF:
        from PIL import Image

        images = [Image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
        return
    import imageio.v2 as imageio

    with imageio.get_writer(path, fps=fps, macro_block_size=1) as writer:
        for frame in frames:
            writer.append_data(np.asarray(frame, dtype=np.uint8))

"""Writing evaluation videos: GIF through Pillow, MP4 through imageio's ffmpeg plugin."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlf.errors import ConfigError


def write_video(path: Path, frames: list[np.ndarray], fps: int = 30) -> Path:
    if not frames:
        raise ConfigError("no frames were rendered; nothing to record")
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".gif":
        try:
            from PIL import Image
        except ImportError:
            raise ConfigError("writing a GIF needs Pillow: pip install 'rlf[video]'") from None
        images = [Image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
        return path
    if suffix in {".mp4", ".webm", ".mkv"}:
        try:
            import imageio.v2 as imageio
            import imageio_ffmpeg  # noqa: F401 - the encoder imageio uses for these formats
        except ImportError:
            raise ConfigError(f"writing {suffix} needs imageio and imageio-ffmpeg: pip install 'rlf[video]' "
                              "(or record a .gif)") from None
        with imageio.get_writer(path, fps=fps, macro_block_size=1) as writer:
            for frame in frames:
                writer.append_data(np.asarray(frame, dtype=np.uint8))
        return path
    raise ConfigError(f"cannot record to {path.name}: use a .mp4 or .gif file name")

"""The core's metric sinks, registered as the loggers ``csv``, ``tensorboard`` and ``progress``
(``rlf/plugins/builtin.py``) and switched on and off with ``run.loggers``.

Every episode gets a CSV row; TensorBoard gets the episode means at each log interval (an event
per CartPole episode would cost more than the episodes). TensorBoard files are written by
tensorboardX, the maintained writer that needs neither torch nor tensorflow.
"""

from __future__ import annotations

import io
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from rlf.config import RunConfig
from rlf.logging.callbacks import Logger
from rlf.logging.stats import CsvLog, Progress
from rlf.storage.files import TENSORBOARD_DIR, TensorBoardFiles


def _tensorboardx():
    """tensorboardX, imported without torch when this process has not imported torch itself.

    tensorboardX's writer imports torch whenever it is installed, only to annotate its argument types
    (it recognises tensors by their type's name). For a run that never needs torch (the tabular
    algorithms) that import was most of the start-up: 1-3 s of CPU before the first env step, more
    than 20,000 IQL steps. Hiding torch from that one import keeps tensorboardX on its numpy path;
    torch stays importable for everything after it.
    """
    if "tensorboardX" in sys.modules or "torch" in sys.modules:
        import tensorboardX

        return tensorboardX
    sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` raises ImportError
    try:
        import tensorboardX
    finally:
        if sys.modules.get("torch", ...) is None:
            del sys.modules["torch"]
    return tensorboardX


class CsvLogger(Logger):
    """``metrics.csv`` (every log interval), ``episodes.csv`` (every episode) and ``eval.csv``
    (every evaluation during training, created at the first one)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.logs: dict[str, CsvLog] = {}

    def _log(self, name: str) -> CsvLog:
        if name not in self.logs:
            self.logs[name] = CsvLog(self.run_dir / name)
        return self.logs[name]

    def on_resume(self, trainer, resume) -> None:
        # a killed run logged past its checkpoint; the resume repeats those steps
        from rlf.storage.files import HISTORY_FILES
        from rlf.storage.rundir import truncate_history

        self.close()
        self.logs = {}
        truncate_history(self.run_dir, resume.env_step, HISTORY_FILES)

    def on_start(self, trainer) -> None:
        self._log("metrics.csv")
        self._log("episodes.csv")

    def on_episode_end(self, trainer, episodes) -> None:
        self._log("episodes.csv").write_many(episodes)

    def on_log(self, trainer, metrics) -> None:
        self._log("metrics.csv").write(metrics)

    def on_eval(self, trainer, metrics) -> None:
        self._log("eval.csv").write(metrics)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


class TensorBoardLogger(Logger):
    """Scalars under ``tensorboard/``: the metrics row as is, evaluations as ``eval/<key>``."""

    def __init__(self, run_dir: Path):
        self.directory = Path(run_dir) / TENSORBOARD_DIR
        self.writer = None
        self.purge_step: int | None = None

    def on_resume(self, trainer, resume) -> None:
        # TensorBoard hides what a killed run logged after its checkpoint (as the CSVs are cut)
        self.purge_step = resume.env_step + 1

    def on_start(self, trainer) -> None:
        SummaryWriter = _tensorboardx().SummaryWriter  # noqa: N806 - the class, by its own name

        files = TensorBoardFiles(self.directory.parent)
        self.writer = SummaryWriter(str(self.directory), flush_secs=30, purge_step=self.purge_step,
                                    filename_suffix=files.suffix)
        files.record()

    def _scalars(self, step: int, values: dict[str, Any], prefix: str = "") -> None:
        for tag, value in values.items():
            if isinstance(value, int | float) and math.isfinite(value) and tag != "env_step":
                self.writer.add_scalar(f"{prefix}{tag}", float(value), global_step=int(step))
        self.writer.flush()

    def on_log(self, trainer, metrics) -> None:
        self._scalars(trainer.counters["env_steps"], metrics)

    def on_eval(self, trainer, metrics) -> None:
        self._scalars(trainer.counters["env_steps"], metrics, prefix="eval/")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class ProgressLogger(Logger):
    """A tqdm bar over env steps with steps/s, ETA and the latest headline metrics (``run.progress``)."""

    def __init__(self, run: RunConfig):
        self.run = run
        self.bar: Progress | None = None

    def on_start(self, trainer) -> None:
        run = self.run
        self.bar = Progress(run.steps, trainer.counters["env_steps"], run.progress, f"{run.algorithm} on {run.env}")

    def on_step(self, trainer, result) -> None:
        from rlf.logging.means import episode_means

        self.bar.update(result.env_steps, lambda: {**trainer.latest, **episode_means(trainer.recent)})

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def build_csv(run_dir: Path, run: RunConfig, config: Any) -> CsvLogger:
    return CsvLogger(run_dir)


def build_tensorboard(run_dir: Path, run: RunConfig, config: Any) -> TensorBoardLogger:
    return TensorBoardLogger(run_dir)


def build_progress(run_dir: Path, run: RunConfig, config: Any) -> ProgressLogger:
    return ProgressLogger(run)


def tensorboard_video(run_dir: Path, tag: str, frames: list[np.ndarray], fps: int, step: int) -> Path:
    """An evaluation video into the run's TensorBoard files, as an animated GIF image summary
    (TensorBoard's images tab plays it). tensorboardX's own ``add_video`` needs moviepy and torch
    tensors; the GIF is encoded with Pillow, which ``--record`` already uses."""
    try:
        from PIL import Image
    except ImportError:
        from rlf.errors import ConfigError

        raise ConfigError("--tensorboard encodes the video with Pillow, which is not installed; "
                          "pip install pillow (or rlf[video])") from None
    FileWriter = _tensorboardx().FileWriter  # noqa: N806
    from tensorboardX.proto.summary_pb2 import Summary

    images = [Image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in frames]
    buffer = io.BytesIO()
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    height, width = np.asarray(frames[0]).shape[:2]
    image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=buffer.getvalue())
    files = TensorBoardFiles(Path(run_dir))
    directory = files.directory
    writer = FileWriter(str(directory), filename_suffix=files.suffix)
    files.record()
    try:
        writer.add_summary(Summary(value=[Summary.Value(tag=tag, image=image)]), global_step=int(step))
    finally:
        writer.close()
    return directory

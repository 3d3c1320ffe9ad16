"""The core's own loggers, ``csv``, ``tensorboard`` and ``progress``, registered through the same hook
a third-party metric sink (MLflow, W&B) uses; ``run.loggers`` switches them on and off."""

from __future__ import annotations

from .hookspecs import RegisterLogger, hookimpl
from .plugins import API_VERSION

RLF_API_VERSION = API_VERSION


@hookimpl
def rlf_register_loggers(register: RegisterLogger):
    register("csv", build_logger="rlf.loggers:build_csv",
             description="metrics.csv, episodes.csv and eval.csv in the run directory")
    register("tensorboard", build_logger="rlf.loggers:build_tensorboard",
             description="TensorBoard event files in <run>/tensorboard (tensorboardX)")
    register("progress", build_logger="rlf.loggers:build_progress",
             description="console progress bar (off with run.progress = false)")

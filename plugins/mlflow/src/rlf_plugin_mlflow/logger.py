"""The mlflow logger: one MLflow run per rlf run directory.

It talks to MLflow through ``MlflowClient`` with an explicit run id, not the ``mlflow.start_run``
global, so several runs in one process (and other code using MLflow) do not get mixed up. The
MLflow run id is kept in ``<run dir>/mlflow.json``: ``rlf train --resume`` continues the same MLflow
run, its metric steps (env steps) carrying on.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import rlf

from .config import MlflowConfig

RUN_FILE = "mlflow.json"
MAX_BATCH = 1000
"""MLflow's limit on metrics per log_batch call."""


def _params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """The resolved rlf config flattened to MLflow params (``algo.lr`` -> ``"0.001"``)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(_params(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = json.dumps(value) if not isinstance(value, str) else value
    return {key: value[:6000] for key, value in flat.items()}  # MLflow caps a param's length


class MlflowLogger(rlf.Logger):
    def __init__(self, run_dir: Path, run: rlf.RunConfig, config: MlflowConfig):
        self.run_dir, self.run, self.config = Path(run_dir), run, config
        self.client = None
        self.run_id: str | None = None
        self.finished = False

    def on_start(self, trainer) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.config.tracking_uri)
        saved = self.run_dir / RUN_FILE
        if saved.is_file():
            self.run_id = json.loads(saved.read_text())["run_id"]
            self.client.update_run(self.run_id, status="RUNNING")
            return
        experiment = self.client.get_experiment_by_name(self.config.experiment)
        experiment_id = (experiment.experiment_id if experiment is not None
                         else self.client.create_experiment(self.config.experiment,
                                                            artifact_location=self.config.artifact_location))
        tags = {"rlf.algorithm": self.run.algorithm, "rlf.env": self.run.env, "rlf.run_dir": str(self.run_dir),
                **self.config.tags}
        created = self.client.create_run(experiment_id, run_name=self.config.run_name or self.run_dir.name, tags=tags)
        self.run_id = created.info.run_id
        saved.write_text(json.dumps({"run_id": self.run_id, "tracking_uri": self.config.tracking_uri,
                                     "experiment": self.config.experiment}))
        run_file = self.run_dir / "run.json"
        if run_file.is_file():
            self._log_params(_params(json.loads(run_file.read_text())["config"]))

    def _log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(key, value) for key, value in params.items()]
        for start in range(0, len(items), 100):  # MLflow's limit on params per call
            self.client.log_batch(self.run_id, params=items[start:start + 100])

    def _log(self, values: dict[str, Any], step: int, prefix: str = "") -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(f"{prefix}{key}", float(value), now, int(step)) for key, value in values.items()
                   if key != "env_step" and isinstance(value, int | float) and math.isfinite(value)]
        for start in range(0, len(metrics), MAX_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + MAX_BATCH])

    def on_log(self, trainer, metrics) -> None:
        self._log(metrics, trainer.counters["env_steps"])

    def on_eval(self, trainer, metrics) -> None:
        self._log(metrics, trainer.counters["env_steps"], prefix="eval/")

    def on_episode_end(self, trainer, episodes) -> None:
        if self.config.log_episodes:
            for row in episodes:
                self._log({k: v for k, v in row.items() if k in ("return", "length")}, row["env_step"], "episode/")

    def on_end(self, trainer, summary) -> None:
        if self.config.log_checkpoints:
            for name in ("checkpoint.rlf", "best.rlf"):
                if (self.run_dir / name).is_file():
                    self.client.log_artifact(self.run_id, str(self.run_dir / name))
        self.finished = True

    def close(self) -> None:
        if self.client is not None and self.run_id is not None:
            # an interrupted or failed run stays resumable: KILLED/FAILED, reopened by the next on_start
            self.client.set_terminated(self.run_id, status="FINISHED" if self.finished else "KILLED")
            self.run_id = None


def build_logger(run_dir: Path, run: rlf.RunConfig, config: MlflowConfig) -> MlflowLogger:
    return MlflowLogger(run_dir, run, config)

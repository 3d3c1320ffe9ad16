"""The ``[logger.mlflow]`` settings (pydantic only: discovery imports this, never mlflow)."""

from __future__ import annotations

from pydantic import Field

from rlf import StrictModel


class MlflowConfig(StrictModel):
    """Where and how the mlflow logger records a run."""

    tracking_uri: str | None = Field(
        None, description="Tracking server or store, e.g. http://mlflow:5000 or sqlite:///mlflow.db "
                          "(default: $MLFLOW_TRACKING_URI, else MLflow's own default).")
    experiment: str = Field("rlf", min_length=1, description="Experiment the run is logged under (created if missing).")
    artifact_location: str | None = Field(
        None, description="Where a newly created experiment stores artifacts (default: MLflow's, ./mlruns for a "
                          "local store).")
    run_name: str | None = Field(None, description="Run name (default: the run directory's name).")
    tags: dict[str, str] = Field(default_factory=dict, description="Extra tags on the MLflow run.")
    log_episodes: bool = Field(
        False, description="Also log every finished episode's return and length (many points on fast envs).")
    log_checkpoints: bool = Field(
        False, description="Upload checkpoint.rlf (and best.rlf) as artifacts when training ends.")

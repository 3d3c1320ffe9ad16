"""Entry point: registers the ``mlflow`` logger. Light: mlflow is imported when a run starts."""

from rlf import RegisterLogger, hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_loggers(register: RegisterLogger):
    from .config import MlflowConfig

    register("mlflow", build_logger="rlf_plugin_mlflow.logger:build_logger", config=MlflowConfig,
             description="MLflow run: metrics, evaluations, config as params, checkpoints as artifacts")

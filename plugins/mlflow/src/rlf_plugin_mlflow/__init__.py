"""rlf-plugin-mlflow: the ``mlflow`` logger (``loggers = [..., "mlflow"]``)."""

from .config import MlflowConfig

__all__ = ["MlflowConfig"]

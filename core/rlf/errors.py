"""Errors a user can fix. The CLI prints them as one line and exits non-zero; anything else is a bug."""


class RlfError(Exception):
    """Base class: the message names what is wrong and how to fix it."""


class ConfigError(RlfError, ValueError):
    """A config value, file or override is invalid."""


class UnknownNameError(RlfError, KeyError):
    """No installed plugin provides the requested algorithm or environment."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class IncompatibleError(RlfError):
    """The algorithm cannot run on the chosen environment."""


class PluginError(RlfError):
    """A plugin failed to load or was built for another core API version."""


class CheckpointError(RlfError):
    """A run directory or checkpoint is missing, foreign or corrupt."""


class RunDirError(CheckpointError):
    """A run directory cannot be used: invalid, not writable, already holding a run, or in use."""


class NonFiniteError(RlfError):
    """Training produced NaN or infinity; the run stopped before it reached a CSV or a checkpoint.

    Not bad input, so the CLI exits with ``exit_code`` rather than the user-error code."""

    exit_code = 1


class EnvWorkerError(RlfError):
    """An environment worker process died or stopped answering (see ``run.env_restarts``).

    Not bad input, so the CLI exits with ``exit_code`` rather than the user-error code."""

    exit_code = 1

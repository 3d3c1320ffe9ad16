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


class PluginRunError(PluginError):
    """A plugin's builder or hook raised (or called sys.exit) while a run was going; the run stopped.

    Not bad input, so the CLI exits with ``exit_code`` rather than the user-error code."""

    exit_code = 1
    hook_only = False
    """True where a callback's hook failed between steps (the training state is whole: it is saved)."""


def plugin_failure(plugin: str, hook: str, exc: BaseException) -> PluginRunError:
    text = " ".join(str(exc).split()) or "(no message)"
    text = text if len(text) <= 300 else text[:300] + "..."
    what = "called sys.exit" if isinstance(exc, SystemExit) else type(exc).__name__
    return PluginRunError(f"plugin {plugin!r} failed in {hook}: {what}: {text}")


def guarded(plugin: str, hook: str, fn, *args, **kwargs):
    """``fn(*args)``, plugin code: any exception it raises (or a ``sys.exit``) ends the run as one line
    naming the plugin, the hook and the exception. rlf's own errors and Ctrl-C pass unchanged."""
    try:
        return fn(*args, **kwargs)
    except (RlfError, KeyboardInterrupt):
        raise
    except (Exception, SystemExit) as exc:
        raise plugin_failure(plugin, hook, exc) from exc

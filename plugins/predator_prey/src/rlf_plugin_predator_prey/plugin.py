"""Entry point: registers the ``predator-prey`` environment. Imports stay light (nothing at module level)."""

from rlf import hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_environments(register):
    from .config import PredatorPreyConfig
    from .env import make_env

    register("predator-prey", build_env=make_env, config=PredatorPreyConfig)

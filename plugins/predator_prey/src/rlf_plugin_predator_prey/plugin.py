"""Entry point: registers the ``predator-prey`` environment.

Discovery stays light: this module and the hook import only rlf and the pydantic config; the env
(gymnasium, pettingzoo) is imported when the first env is built.
"""

from rlf import hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


def make_env(config, render_mode=None):
    """The registered builder: imports the env module on first use (picklable, module-level)."""
    from .env import make_env as build

    return build(config, render_mode=render_mode)


@hookimpl
def rlf_register_environments(register):
    from .config import PredatorPreyConfig

    register("predator-prey", build_env=make_env, config=PredatorPreyConfig)

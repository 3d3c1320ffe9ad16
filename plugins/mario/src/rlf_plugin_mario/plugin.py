"""Entry point: registers the ``mario`` environment.

Stays light: the builder is named as a string, so discovery (``rlf list``) imports only the pydantic
config; gymnasium, gym, nes-py and the emulator load when an environment is first built.
"""

from rlf import hookimpl

RLF_API_VERSION = 1  # the rlf plugin API this plugin was written for


@hookimpl
def rlf_register_environments(register):
    from .config import MarioConfig

    # make_mario(config, render_mode=None) -> gymnasium.Env; one emulator per subprocess when vector=auto
    register("mario", build_env="rlf_plugin_mario.env:make_mario", config=MarioConfig, prefer_subprocess=True)

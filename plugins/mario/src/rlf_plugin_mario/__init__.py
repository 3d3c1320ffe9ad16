"""rlf-plugin-mario: Super Mario Bros (gym-super-mario-bros on the nes-py emulator) for rlf.

Importing this package stays light; the emulator is imported when an environment is built::

    from rlf_plugin_mario.env import make_mario
    from rlf_plugin_mario.config import MarioConfig
    env = make_mario(MarioConfig(world=1, stage=1))
"""

__version__ = "0.2.0"

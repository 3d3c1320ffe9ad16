"""The core's default plugin, named ``rlf``: what the core ships is registered through the same hooks
a third-party plugin implements (pluggy collects the hook implementations imported here)."""

from __future__ import annotations

from .builtin_collectors import rlf_register_collectors
from .builtin_envs import rlf_register_environments
from .builtin_loggers import rlf_register_loggers
from .builtin_strategies import rlf_register_strategies
from .plugins import API_VERSION

RLF_API_VERSION = API_VERSION

__all__ = ["RLF_API_VERSION", "rlf_register_collectors", "rlf_register_environments", "rlf_register_loggers",
           "rlf_register_strategies"]

"""The env a fork server builds once, for every env worker it forks to start from a copy of.

Imported only in the fork server (``rlf.envs.workers.worker_context`` preloads it there), where the env var
below carries the pickled env factory. An env whose builder is marked ``fork_template = True`` (Mario:
building one plays the emulator through the title screen, a quarter of a CPU second) is then built
once instead of once per worker; each forked worker takes its own copy-on-write copy, in the state a
fresh build has. Best effort: anything that goes wrong leaves no template, and each worker builds its
own env (and reports its own errors) as before.
"""

from __future__ import annotations

import base64
import os
import pickle
from typing import Any

VARIABLE = "RLF_FORK_TEMPLATE"

_template: tuple[str, Any] | None = None
"""(key, env): the key names the factory the env was built from (see ``rlf.envs.workers.template_key``)."""


def _build() -> None:
    global _template
    payload = os.environ.pop(VARIABLE, None)
    if not payload:
        return
    key, _, data = payload.partition(":")
    try:
        factory = pickle.loads(base64.b64decode(data))
        _template = (key, factory())
    except Exception:  # the workers build (and report) it themselves
        _template = None


def take(key: str | None) -> Any:
    """The template env if it was built from the factory ``key`` names (once per process), else None."""
    global _template
    if key is None or _template is None or _template[0] != key:
        return None
    env, _template = _template[1], None
    return env


_build()

import sys
from pathlib import Path

import pytest
from rlf_plugin_predator_prey import parallel_env

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def make():
    """Build an env from config fields: ``make(size=4, learners="all")``."""
    def build(render_mode=None, **fields):
        return parallel_env(render_mode=render_mode, **fields)
    return build


@pytest.fixture
def only_our_plugins(monkeypatch):
    """The core's registry with just this plugin and the random baseline (the e2e algorithm), so other
    installed plugins (and their imports) neither slow these tests down nor break them."""
    from rlf.plugins import reset_registry

    monkeypatch.setenv("RLF_LOAD_PLUGINS", "predator-prey,random")
    reset_registry()
    yield
    reset_registry()

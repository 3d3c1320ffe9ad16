import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def registry():
    from support import TestPlugin

    from rlf.plugins import load_registry

    return load_registry(extra_plugins=[("test-plugin", TestPlugin())])

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def ppo_registry():
    from ppo_test_envs import ppo_only_registry

    return ppo_only_registry()

"""A Ray instance per test module: starting one costs ~10 s on a busy 2-core machine, so the tests
of a module share it; modules that need a different one (a simulated cluster) shut it down first."""

import logging
import os

import pytest

# Nothing outside this machine is reachable from the tests; a private instance reports nothing.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


@pytest.fixture(scope="module")
def local_ray():
    import ray

    if ray.is_initialized():
        ray.shutdown()
    # Logical CPUs: the actors of a test ask for 1 each and mostly wait, as the async collector's
    # subprocesses do.
    ray.init(address="local", num_cpus=8, include_dashboard=False, object_store_memory=128 * 1024**2,
             logging_level=logging.WARNING)
    yield ray
    ray.shutdown()


@pytest.fixture
def ray_registry():
    from rlf_plugin_ray.testing import FlakyEnvPlugin

    from rlf.plugins import load_registry

    return load_registry(extra_plugins=[("flaky", FlakyEnvPlugin())])

"""The plugin as a user meets it: `--set vector=ray` trains on a local Ray from the command line,
discovery and runs with other collectors never import Ray, bad settings are one-line errors, and
without the plugin the other collectors work and `vector=ray` says what to install."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rlf
from rlf import ConfigError
from rlf.testing import read_csv

RLF = str(Path(sys.executable).parent / "rlf")


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RLF_LOAD_PLUGINS")}
    return subprocess.run(args, capture_output=True, text=True, timeout=300, env={**environment, **env})


def test_the_command_line_trains_on_a_private_local_ray(tmp_path):
    done = run(RLF, "train", "ppo", "--env", "gym:CartPole-v1", "--steps", "256", "--no-progress",
               "--set", "vector=ray", "--set", "num_envs=4", "--set", "algo.rollout_steps=32",
               "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    rows = read_csv(tmp_path / "run" / "metrics.csv")
    assert rows[-1]["env_step"] == 256 and "env_restarts" not in rows[-1]
    assert (tmp_path / "run" / "checkpoint.rlf").is_file()


def test_discovery_and_other_collectors_never_import_ray(tmp_path):
    code = f"""
import sys
import rlf
from rlf.plugins import load_registry
assert load_registry().collectors["ray"].plugin == "ray"
assert "ray" not in sys.modules, "discovery imported ray"
rlf.make("ppo", "gym:CartPole-v1", overrides=["steps=64", "vector=async", "num_envs=2", "progress=false",
         "run_dir='{tmp_path / 'run'}'"]).train()
assert "ray" not in sys.modules, "a run with vector=async imported ray"
"""
    done = run(sys.executable, "-c", code)
    assert done.returncode == 0, done.stderr


def test_without_the_plugin_vector_ray_is_one_line_naming_what_to_install(tmp_path):
    done = run(RLF, "train", "ppo", "--steps", "64", "--set", "vector=ray", "--run-dir", str(tmp_path / "run"),
               RLF_LOAD_PLUGINS="ppo")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "rlf: error: run.vector: unknown collector 'ray': installed: async, sync. rlf-plugin-ray is installed but "
        "RLF_LOAD_PLUGINS='ppo' leaves it out: add 'ray' to it or unset it (or 'auto')"]


def test_no_running_cluster_is_one_line_with_what_to_do(tmp_path, monkeypatch):
    # In-process with Ray's answer for "no cluster" stubbed: `auto` really looks for any Ray process on
    # the machine, and a cluster another test env starts in parallel (the docker env) would be found.
    import ray

    def no_cluster(address=None, **kwargs):
        raise ConnectionError("Could not find any running Ray instance. Please specify the one to connect to.")

    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # the token hint is tested below
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", no_cluster)
    algo = rlf.make("ppo", "gym:CartPole-v1", overrides=[
        "steps=64", "progress=false", "vector=ray", "collector.address='auto'", f"run_dir='{tmp_path}'"])
    with pytest.raises(ConfigError) as caught:
        algo.train()
    assert str(caught.value) == (
        "collector.address=auto: cannot join the Ray cluster (Could not find any running Ray instance. Please "
        "specify the one to connect to.); start one (`ray start --head`), set RAY_ADDRESS or collector.address "
        "to a running one, or use collector.address=local")


def test_a_cluster_that_refuses_the_driver_names_token_authentication(tmp_path, monkeypatch):
    # What a Ray 2.60 driver or Ray Client without the token of a `ray start` cluster gets (measured)
    import ray

    def refused(address=None, **kwargs):
        raise ConnectionError("ray client connection timeout")

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refused)
    monkeypatch.setattr("rlf_plugin_ray.probe.check", lambda address, timeout: None)
    algo = rlf.make("ppo", "gym:CartPole-v1", overrides=[
        "steps=64", "progress=false", "vector=ray", "collector.address='ray://head:10001'", f"run_dir='{tmp_path}'"])
    with pytest.raises(ConfigError) as caught:
        algo.train()
    assert str(caught.value).endswith(
        "; if the cluster uses token authentication (Ray 2.60's `ray start` turns it on where a token file exists), set "
        "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN to the cluster's token here")


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_where_nothing_listens_is_one_line_at_once_and_leaves_the_run_as_it_was(tmp_path, scheme):
    run_dir = tmp_path / "run"
    first = run(RLF, "train", "ppo", "--env", "gym:CartPole-v1", "--steps", "64", "--no-progress", "--set",
                "vector=sync", "--set", "algo.rollout_steps=32", "--run-dir", str(run_dir))
    assert first.returncode == 0, first.stderr
    # what a resume reads: run.json records each attempt's settings, the checkpoint is the run's own
    data = ("checkpoint.rlf", "metrics.csv", "episodes.csv")
    saved = {name: (run_dir / name).read_bytes() for name in data}
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"{scheme}127.0.0.1:{port}"
    started = time.monotonic()
    done = run(RLF, "train", "--resume", str(run_dir), "--steps", "128", "--set", "vector=ray",
               "--set", f"collector.address='{address}'", "--set", "collector.connect_timeout_s=600")
    assert time.monotonic() - started < 120  # not the connect timeout: a refusal is final
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"rlf: error: collector.address={address}: nothing listens there (Connection refused); start the cluster's "
        "head there (`ray start --head`), point collector.address or RAY_ADDRESS at a running one, or use "
        "collector.address=local")
    # the run is as it was: checkpoint (with its settings) and history
    assert {name: (run_dir / name).read_bytes() for name in data} == saved


@pytest.mark.parametrize(("setting", "message"), [
    ("collector.address='nowhere'", r"collector.address: must be local, auto, ray://HOST:PORT or HOST:PORT"),
    ("collector.envs_per_actor=0", r"collector.envs_per_actor: .*greater than or equal to 1"),
    ("collector.max_restarts=-2", r"collector.max_restarts: .*greater than or equal to -1"),
    ("collector.scheduling='pack'", r"collector.scheduling: .*'default' or 'spread'"),
    ("collector.connect_timeout_s=0", r"collector.connect_timeout_s: .*greater than 0"),
    ("collector.envs_per_actr=2", r"unknown key 'collector.envs_per_actr'; did you mean collector.envs_per_actor"),
])
def test_bad_settings_are_config_errors(setting, message):
    with pytest.raises(ConfigError, match=message):
        rlf.make("ppo", "gym:CartPole-v1", overrides=["vector=ray", setting])


def test_settings_are_parsed_into_the_collector_model(tmp_path):
    algo = rlf.make("ppo", "gym:CartPole-v1", overrides=[
        "vector=ray", "collector.address='ray://head:10001'", "collector.envs_per_actor=4",
        "collector.resources={env_node = 1}", f"run_dir='{tmp_path}'"])
    settings = algo.resolved.collector
    assert settings.address == "ray://head:10001" and settings.envs_per_actor == 4
    assert settings.resources == {"env_node": 1.0} and settings.max_restarts == 3


@pytest.mark.parametrize(("num_envs", "parts", "cpus", "actor_cpus", "expected"), [
    (8, 2, 2, 1.0, 4),     # 2 cores: one actor per core, as vector=async's two groups
    (8, 2, 8, 1.0, 1),     # a CPU for every env: each its own process
    (8, 2, 64, 1.0, 1),    # more CPUs than envs
    (8, 2, 3, 1.0, 3),     # 3 actors' worth: 3 envs each (parts then split 4 = 3 + 1)
    (8, 2, 0, 1.0, 4),     # no free CPU now: one actor per part, placed when CPUs free up
    (8, 2, 4, 2.0, 4),     # 2-CPU actors on 4 CPUs
    (8, 2, 1, 0.0, 1),     # actors that reserve no CPU
    (1, 1, 16, 1.0, 1),
])
def test_unset_envs_per_actor_uses_one_actor_per_free_cpu(num_envs, parts, cpus, actor_cpus, expected):
    from rlf_plugin_ray.collector import auto_envs_per_actor

    assert auto_envs_per_actor(num_envs, parts, cpus, actor_cpus) == expected


def test_a_private_ray_on_two_cpus_runs_one_actor_per_cpu():
    import ray
    from rlf_plugin_ray import RayCollectorConfig, RayVector

    from rlf.envs.gym import GymEnvConfig, make_gym_env

    if ray.is_initialized():  # another module's instance: this test is about the run's own
        ray.shutdown()
    factory = rlf.EnvFactory(make_gym_env, GymEnvConfig(id="CartPole-v1"))
    envs = RayVector("gym:CartPole-v1", factory, 8, RayCollectorConfig(address="local", local_cpus=2))
    try:
        assert envs.envs_per_actor == 4 and [actor.envs for actor in envs.actors] == [slice(0, 4), slice(4, 8)]
        assert envs.reset(seed=0)["agent"].shape == (8, 4)
    finally:
        envs.close()
    assert not ray.is_initialized()  # the run's private instance ends with it

"""The CPU image: built offline from the wheelhouse as `rlf`, it trains ICM on Mario, evaluates the run
from its volume, lists every plugin, runs as a non-root user and stays under 2.5 GB; a Ray head and a
worker started with docker/compose.yaml's commands host the env actors of a `vector=ray` training run.
The build leaves nothing behind on the engine but the image, which the module removes when it is done.

Needs a Docker engine (tox -e docker starts one with scripts/docker_engine.sh where none answers)
and a wheelhouse (scripts/build_wheels.sh). Builds and runs use --network host, the only network mode
the engine on this kind of machine supports.
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# not `rlf`: a developer's own image of that name must survive the tests
IMAGE = os.environ.get("RLF_DOCKER_IMAGE", "rlf-test")
MAX_IMAGE_BYTES = 2_500_000_000
PLUGINS = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))


def docker(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def run(*args: str, volume: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    mount = ["-v", f"{volume}:/runs"] if volume else []
    return docker("run", "--rm", "--network", "host", *mount, IMAGE, *args, timeout=timeout)


def dangling_images() -> set[str]:
    listed = docker("images", "--quiet", "--no-trunc", "--filter", "dangling=true", timeout=120)
    assert listed.returncode == 0, listed.stderr
    return set(listed.stdout.split())


@pytest.fixture(scope="module")
def image() -> Iterator[dict]:
    before = dangling_images()
    # What a build killed before its exit trap leaves (a CI job stopped at its time limit): the image and the
    # build stage still tagged, to be untagged by this run's builds; they must go, not stay as <none>.
    for stale in (IMAGE, f"{IMAGE}-build-stage"):
        planted = subprocess.run(["docker", "build", "--network", "host", "-t", stale, "-"], capture_output=True,
                                 text=True, timeout=300,
                                 input=f"FROM debian:bookworm-slim\nLABEL rlf.test.stale={secrets.token_hex(8)}\n")
        assert planted.returncode == 0, planted.stderr
    # twice: a rebuild must remove what the first build's image became (untagged) as well as its build stage
    for _ in range(2):
        build = subprocess.run(["bash", str(ROOT / "scripts" / "docker_build.sh"), IMAGE], capture_output=True,
                               text=True, timeout=1800)
        assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    inspected = docker("image", "inspect", IMAGE)
    assert inspected.returncode == 0, inspected.stderr
    yield {**json.loads(inspected.stdout)[0], "dangling_left": sorted(dangling_images() - before),
           "build_log": build.stdout + build.stderr}
    docker("rmi", IMAGE, timeout=300)


def test_building_twice_leaves_no_untagged_images_behind(image: dict):
    # each CI run used to leave 4.3 GB of untagged images (the build stage and the previous image) until the
    # disk filled up
    assert image["dangling_left"] == [], f"the builds left untagged images: {image['dangling_left']}"


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def test_the_engine_receives_only_what_the_build_reads(image: dict):
    # the legacy builder sent every tracked file (docs, tests, 150 MB of experiment snapshots) until the
    # staged context carried the Dockerfile's ignore file as .dockerignore
    sent = re.findall(r"Sending build context to Docker daemon\s+([\d.]+)\s*([kMG]?B)", image["build_log"])
    assert sent, image["build_log"][-2000:]
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}
    size = max(float(value) * scale[unit] for value, unit in sent)
    wheelhouse = Path(os.environ.get("RLF_WHEELHOUSE", ROOT / "wheelhouse"))
    admitted = sum(tree_bytes(ROOT / name) for name in ("core", "plugins")) + tree_bytes(wheelhouse)
    assert 0.5 * tree_bytes(wheelhouse) < size <= admitted + 2e6, (size, admitted)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    volume = tmp_path_factory.mktemp("runs")
    volume.chmod(0o777)  # the image's user (uid 10001) writes here
    return volume


def test_image_is_small_runs_as_non_root_and_has_the_rlf_entrypoint(image: dict):
    size = image["Size"]
    print(f"image {IMAGE}: {size / 1e9:.2f} GB")
    assert size <= MAX_IMAGE_BYTES, f"image is {size / 1e9:.2f} GB, over the 2.5 GB budget"
    config = image["Config"]
    assert config["Entrypoint"] == ["rlf"]
    assert config["User"] and config["User"].split(":")[0] not in ("", "0", "root")
    assert "/runs" in (config.get("Volumes") or {})


def test_plugins_lists_every_plugin_loaded(image: dict):
    listed = run("plugins", "--json", timeout=300)
    assert listed.returncode == 0, listed.stderr
    rows = {row["distribution"]: row for row in json.loads(listed.stdout)}
    for plugin in PLUGINS:
        distribution = "rlf-plugin-" + plugin.replace("_", "-")
        assert distribution in rows, f"{distribution} is missing from the image"
        assert rows[distribution]["error"] is None, rows[distribution]["error"]
    text = run("plugins", timeout=300)
    assert text.returncode == 0 and "ERROR" not in text.stdout, text.stdout + text.stderr


def test_train_icm_trains_on_mario_by_default_and_the_run_evaluates_from_the_volume(image: dict, runs: Path):
    assert "mario" in PLUGINS, "`docker run rlf train icm` is meant to train on Mario: plugins/mario is missing"
    # no --env: the image's ICM defaults to Mario. Two envs and 64-step rollouts make the 256 steps two
    # ICM updates rather than none.
    trained = run("train", "icm", "--steps", "256", "--set", "num_envs=2", "--set", "algo.rollout_steps=64",
                  "--no-progress", volume=runs)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "training icm on mario" in trained.stderr, trained.stderr
    done = [line for line in trained.stdout.splitlines() if line.startswith("done: ")]
    assert done and json.loads(done[0][len("done: "):])["env_step"] == 256, trained.stdout
    run_dirs = [p for p in runs.iterdir() if p.name.startswith("icm-")]
    assert len(run_dirs) == 1, list(runs.iterdir())
    assert (run_dirs[0] / "checkpoint.rlf").is_file() and (run_dirs[0] / "metrics.csv").is_file()

    evaluated = run("eval", f"runs/{run_dirs[0].name}", "--episodes", "1", "--json", volume=runs)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    assert json.loads(evaluated.stdout.strip().splitlines()[-1])["episodes"] == 1.0


def compose_command(service: str, with_command: bool = True, **variables: str) -> list[str]:
    """A service's entrypoint (and command) from docker/compose.yaml, its ${VAR:-default} filled in."""
    spec = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"][service]

    def fill(text: str) -> str:  # compose's interpolation: ${VAR:-default}, and $$ for a literal $
        text = re.sub(r"(?<!\$)\$\{(\w+):-([^}]*)\}", lambda m: variables.get(m.group(1), m.group(2)), text)
        return text.replace("$$", "$")

    return [fill(part) for part in [*spec["entrypoint"], *(spec["command"] if with_command else [])]]


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def test_compose_cluster_hosts_the_env_actors_of_a_training_run(image: dict, runs: Path):
    variables = {"RAY_PORT": free_port(), "RAY_CLIENT_PORT": free_port(), "RAY_HEAD": "127.0.0.1"}
    names = {service: f"rlf-ray-{service}-{os.getpid()}" for service in ("head", "worker")}
    # compose.yaml's default: token authentication, every container given the cluster's token
    token = ["-e", "RAY_AUTH_MODE=token", "-e", f"RAY_AUTH_TOKEN={secrets.token_hex(32)}"]
    try:
        for service, name in names.items():  # host networking: the only mode this engine supports
            entrypoint, *command = compose_command(service, **variables)
            started = docker("run", "-d", "--rm", "--name", name, "--network", "host", "--shm-size", "1g", *token,
                             "--entrypoint", entrypoint, IMAGE, *command, timeout=120)
            assert started.returncode == 0, started.stderr
        # The head and the trainer offer no CPUs (--num-cpus=0): the actors can only run on the worker,
        # and wait for it to join if it is not there yet. The trainer joins as a node of its own.
        entrypoint, *command = compose_command("train", with_command=False, **variables)
        trained = docker("run", "--rm", "--network", "host", "--shm-size", "1g", *token, "-v", f"{runs}:/runs",
                         "--entrypoint", entrypoint, IMAGE, *command,
                         "train", "ppo", "--env", "gym:CartPole-v1", "--steps", "256", "--no-progress",
                         "--set", "vector=ray", "--set", "collector.address=auto",
                         "--set", "collector.restart_timeout_s=180", "--set", "num_envs=2",
                         "--set", "algo.rollout_steps=64", timeout=600)
        assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
        run_dirs = [p for p in runs.iterdir() if p.name.startswith("ppo-")]
        assert len(run_dirs) == 1, list(runs.iterdir())
        with open(run_dirs[0] / "metrics.csv") as handle:
            last = list(csv.DictReader(handle))[-1]
        assert float(last["env_step"]) == 256 and "env_restarts" not in last
    finally:
        for name in names.values():
            docker("rm", "-f", name, timeout=120)

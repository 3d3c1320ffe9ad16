"""A release a user installs by name: scripts/release.py builds an sdist and a wheel of the core and of every
plugin and checks them (twine, one version, plugins admitting that rlf); the files, served by a real
package index on loopback (pypiserver, no fallback to PyPI), install with the README's
``pip install rlf-plugin-icm`` into a fresh venv, and ``rlf train icm`` runs. Third-party wheels come from
the wheelhouse through the same index, so nothing leaves the machine."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("release", ROOT / "scripts" / "release.py")
release = importlib.util.module_from_spec(spec)
spec.loader.exec_module(release)
NAMES = [release.project_name(path) for path in release.projects()]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "release.py"), "--dist", str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"release: {len(NAMES)} distributions of version" in done.stdout and "twine check passed" in done.stdout
    return out


def test_every_distribution_has_an_sdist_and_a_wheel_and_passes_the_checks(dist: Path):
    assert len(NAMES) >= 15 and NAMES[0] == "rlf"
    for name in NAMES:
        stem = name.replace("-", "_")
        assert len(list(dist.glob(f"{stem}-*.whl"))) == 1 and len(list(dist.glob(f"{stem}-*.tar.gz"))) == 1, name
    assert release.check(dist, NAMES) == []


def fake_wheel(directory: Path, name: str, version: str, requires: tuple[str, ...] = ("rlf>=0.1",),
               license_: str | None = "MIT") -> None:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", "Summary: s",
             "Requires-Python: >=3.11", *([f"License: {license_}"] if license_ else []),
             *(f"Requires-Dist: {r}" for r in requires), "", "a readme"]
    stem = f"{name.replace('-', '_')}-{version}"
    with zipfile.ZipFile(directory / f"{stem}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{stem}.dist-info/METADATA", "\n".join(lines))
    (directory / f"{stem}.tar.gz").write_bytes(b"")


@pytest.mark.parametrize(("plugin", "phrase"), [
    ({"version": "0.1.1"}, "rlf-plugin-x is version 0.1.1 but rlf is 0.1.0: give every distribution the same version"),
    ({"requires": ("rlf>=0.2",)}, "rlf-plugin-x requires rlf>=0.2, which rules out rlf 0.1.0"),
    ({"requires": ("numpy",)}, "rlf-plugin-x does not require rlf"),
    ({"license_": None}, "rlf-plugin-x declares no license"),
])
def test_what_an_index_user_would_trip_over_is_found(tmp_path, plugin, phrase):
    fake_wheel(tmp_path, "rlf", "0.1.0", requires=())
    fake_wheel(tmp_path, "rlf-plugin-x", **{"version": "0.1.0", **plugin})
    assert release.check(tmp_path, ["rlf", "rlf-plugin-x"]) == [phrase]
    (tmp_path / "rlf_plugin_x-0.1.0.tar.gz").unlink(missing_ok=True)


def test_a_missing_file_is_found_and_the_script_refuses_a_directory_of_other_files(tmp_path, capsys):
    fake_wheel(tmp_path, "rlf", "0.1.0", requires=())
    (tmp_path / "rlf-0.1.0.tar.gz").unlink()
    assert release.check(tmp_path, ["rlf"]) == [f"rlf: expected one wheel and one sdist in {tmp_path}, found 1 and 0"]
    (tmp_path / "notes.txt").write_text("mine")
    assert release.main(["--dist", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"release: error: {tmp_path} holds other files (notes.txt); choose an empty --dist\n"
    assert (tmp_path / "notes.txt").read_text() == "mine"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def index(dist: Path, tmp_path_factory) -> str:
    """pypiserver on 127.0.0.1 serving the release and the wheelhouse's third-party wheels (not its rlf ones)."""
    wheelhouse = Path(os.environ.get("RLF_WHEELHOUSE", ROOT / "wheelhouse"))
    assert list(wheelhouse.glob("torch-*.whl")), f"no wheelhouse at {wheelhouse}: run scripts/build_wheels.sh first"
    packages = tmp_path_factory.mktemp("index")
    for path in [*dist.iterdir(), *(w for w in wheelhouse.glob("*.whl") if not re.match(r"rlf[-_]", w.name))]:
        (packages / path.name).symlink_to(path)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port),
                               "-a", ".", "-P", ".", "--disable-fallback", str(packages)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/simple/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "rlf-plugin-icm/", timeout=5) as page:
                    assert "rlf_plugin_icm" in page.read().decode()
                break
            except OSError:
                assert server.poll() is None, f"pypiserver stopped: {server.stderr.read()[-2000:]}"
                assert time.monotonic() < deadline, "pypiserver did not answer within 60 s"
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_pip_installs_icm_by_name_from_the_index_and_rlf_train_runs(index: str, tmp_path: Path):
    home = tmp_path / "venv"
    venv.create(home, with_pip=True)
    # only this index: no pip.conf, no find-links or extra index of the machine
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONPATH="")
    installed = subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "--index-url", index,
                                "-c", str(ROOT / "constraints.txt"), "rlf-plugin-icm"],
                               capture_output=True, text=True, timeout=1500, env=env)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    assert re.search(r"Downloading http://127\.0\.0\.1:\d+/packages/rlf_plugin_icm-", installed.stdout), installed.stdout
    listing = subprocess.run([str(home / "bin" / "python"), "-c",
                              "import importlib.metadata as m, json; print(json.dumps([d.metadata['Name'] "
                              "for d in m.distributions()]))"], capture_output=True, text=True, check=True, env=env)
    ours = {re.sub(r"[-_.]+", "-", n).lower() for n in json.loads(listing.stdout)}
    assert {n for n in ours if n == "rlf" or n.startswith("rlf-plugin-")} == {"rlf", "rlf-plugin-ppo", "rlf-plugin-icm"}
    trained = subprocess.run([str(home / "bin" / "rlf"), "train", "icm", "--env", "gym:CartPole-v1", "--steps", "512",
                              "--no-progress"], cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert any(line.startswith("done: ") for line in trained.stdout.splitlines()), trained.stdout

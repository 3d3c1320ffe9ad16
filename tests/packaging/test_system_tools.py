"""scripts/system_tools.sh, the start of scripts/test.sh: the system tools the tests need are there,
installed (as root with apt-get), or the command stops with one line naming them; no test skips for
want of one. Each case runs it with a PATH of stand-ins, so nothing is installed for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "system_tools.sh"
BASH = shutil.which("bash")


def _tools(directory: Path, *names: str, script: str = "exit 0") -> Path:
    directory.mkdir(exist_ok=True)
    for name in names:
        (directory / name).write_text(f"#!{BASH}\n{script}\n")
        (directory / name).chmod(0o755)
    return directory


def _run(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BASH, str(SCRIPT), *args], env={"PATH": str(path)}, capture_output=True, text=True,
                          timeout=60)


def test_all_there_is_silence(tmp_path):
    done = _run(_tools(tmp_path / "bin", "ip", "unshare", "nft"))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_tool_still_missing_stops_the_command_naming_it_and_its_package(tmp_path):
    done = _run(_tools(tmp_path / "bin", "ip", "unshare", "apt-get"))  # an apt-get that installs nothing
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "need nft (packages: nftables)" in done.stderr
    assert "apt-get install nftables" in done.stderr


def test_without_apt_get_or_root_the_command_stops_and_with_them_it_installs(tmp_path):
    bin_dir = _tools(tmp_path / "bin", "ip")
    refused = _run(bin_dir)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "need unshare nft (packages: util-linux nftables)" in refused.stderr
    assert "apt-get install util-linux nftables" in refused.stderr
    # an apt-get that "installs" by making the tools appear, and records how it was called
    log = tmp_path / "apt.log"
    _tools(bin_dir, "apt-get", script=f'echo "$@" >> {log}; [[ $1 == install ]] && for t in unshare nft; do '
                                       f'printf "#!{BASH}\\nexit 0\\n" > {bin_dir}/$t; chmod +x {bin_dir}/$t; done; exit 0')
    done = _run(bin_dir)
    if os.geteuid() != 0:
        assert done.returncode == 2 and not log.exists()
        return
    assert done.returncode == 0, done.stderr
    assert "installing util-linux nftables" in done.stdout
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq --no-install-recommends util-linux nftables"]


@pytest.mark.parametrize("args", [("-e", "core,ppo"), ("-ecore",), ("--env=lint",), ("-e", "core", "--", "-k", "x")])
def test_envs_that_need_none_of_them_need_none(tmp_path, args):
    assert _run(_tools(tmp_path / "bin", "ip"), *args).returncode == 0


@pytest.mark.parametrize("args", [("-e", "core,ray"), ("--env=ray",), ("-e", "ALL"), ("--parallel", "2")])
def test_the_ray_env_or_all_of_them_need_them(tmp_path, args):
    assert _run(_tools(tmp_path / "bin", "ip"), *args).returncode == 2

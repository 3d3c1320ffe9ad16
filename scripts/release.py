"""Build and check a release of rlf: the core and every plugin, as an sdist and a wheel each.

    python scripts/release.py [--dist DIR]            # default: dist/ at the repository root

1. builds every distribution (``python -m build --sdist --wheel``, without build isolation, so it works
   offline where the build tools are installed: the packaging env has ``build``, ``twine`` and
   ``setuptools``);
2. checks their metadata with ``twine check --strict`` (the README renders on an index's page);
3. checks what an index user relies on: one version across the core and every plugin, each plugin's
   requirement on ``rlf`` admitting that version, the same ``Requires-Python``, a summary, a license and
   a readme on every distribution, and both files of each.

Any finding is one ``release: error:`` line and exit 2; a clean release prints one line per distribution
and where the files are. Uploading is left to the maintainer (``twine upload DIR/*``), with credentials
this script never sees. The end-to-end test (tests/packaging/test_release.py) serves DIR from a package
index on loopback and installs ``rlf-plugin-icm`` from it by name, as the README says.
"""

from __future__ import annotations

import argparse
import email.parser
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


class ReleaseError(Exception):
    pass


def projects() -> list[Path]:
    """The core (the repository root) and every plugin directory, in build order."""
    return [ROOT, *sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))]


def project_name(path: Path) -> str:
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]["name"]


def build(path: Path, dist: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation", "--outdir",
                           str(dist), str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise ReleaseError(f"building {project_name(path)} failed: {last[0]} (run `python -m build {path}` to see why)")
    for leftover in (path / "build",):  # setuptools' staging dir would leak deleted files into a later build
        shutil.rmtree(leftover, ignore_errors=True)


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(archive.read(name).decode())


def check(dist: Path, names: list[str]) -> list[str]:
    """The findings (one phrase each) over the built files in ``dist``; empty when the release is clean."""
    findings: list[str] = []
    metas: dict[str, email.message.Message] = {}
    for name in names:
        stem = canonicalize_name(name).replace("-", "_")
        wheels, sdists = sorted(dist.glob(f"{stem}-*.whl")), sorted(dist.glob(f"{stem}-*.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            findings.append(f"{name}: expected one wheel and one sdist in {dist}, found {len(wheels)} and {len(sdists)}")
            continue
        metas[name] = wheel_metadata(wheels[0])
    if not metas:
        return findings
    core = metas.get("rlf")
    version = Version(core["Version"]) if core is not None else None
    python = core["Requires-Python"] if core is not None else None
    for name, meta in metas.items():
        if version is not None and Version(meta["Version"]) != version:
            findings.append(f"{name} is version {meta['Version']} but rlf is {version}: give every distribution "
                            "the same version")
        if meta["Requires-Python"] != python:
            findings.append(f"{name} requires Python {meta['Requires-Python']!r}, rlf {python!r}")
        for field in ("Summary",):
            if not (meta[field] or "").strip():
                findings.append(f"{name} has no {field} in its metadata")
        if not (meta["License-Expression"] or meta["License"] or any(
                c.startswith("License ::") for c in meta.get_all("Classifier") or [])):
            findings.append(f"{name} declares no license")
        if not meta.get_payload().strip():
            findings.append(f"{name} has no readme (long description)")
        if name != "rlf" and version is not None:
            on_rlf = [Requirement(r) for r in meta.get_all("Requires-Dist") or []
                      if canonicalize_name(Requirement(r).name) == "rlf" and not Requirement(r).marker]
            if not on_rlf:
                findings.append(f"{name} does not require rlf")
            elif not all(r.specifier.contains(version, prereleases=True) for r in on_rlf):
                findings.append(f"{name} requires {on_rlf[0]}, which rules out rlf {version}")
    return findings


def twine_check(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir() if p.suffix in (".whl", ".gz"))
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files], capture_output=True, text=True)
    if done.returncode != 0:
        failed = [line for line in done.stdout.splitlines() if "FAILED" in line or "WARNING" in line or "ERROR" in line]
        raise ReleaseError(f"twine check failed: {(failed or done.stdout.strip().splitlines() or ['?'])[0].strip()}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="where the files go (emptied first)")
    args = parser.parse_args(argv)
    dist = args.dist.resolve()
    try:
        if dist.exists() and any(dist.iterdir()):
            stale = [p for p in dist.iterdir() if p.suffix not in (".whl", ".gz")]
            if stale:
                raise ReleaseError(f"{dist} holds other files ({stale[0].name}); choose an empty --dist")
            for old in dist.iterdir():
                old.unlink()
        dist.mkdir(parents=True, exist_ok=True)
        paths = projects()
        names = [project_name(p) for p in paths]
        for path, name in zip(paths, names, strict=True):
            build(path, dist)
            print(f"release: built {name}", flush=True)
        twine_check(dist)
        findings = check(dist, names)
        if findings:
            raise ReleaseError(f"{findings[0]}" + (f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""))
    except ReleaseError as exc:
        print(f"release: error: {exc}", file=sys.stderr)
        return 2
    version = wheel_metadata(next(dist.glob("rlf-*.whl")))["Version"]
    print(f"release: {len(names)} distributions of version {version} (sdist and wheel each) in {dist}; "
          f"twine check passed; upload with `twine upload {dist}/*`")
    return 0


if __name__ == "__main__":
    sys.exit(main())

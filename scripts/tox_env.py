"""What each tox env installs and runs (tox.ini calls it; stdlib only, it runs inside the env).

    python scripts/tox_env.py install ENV    install ENV's packages from the wheelhouse and check them
    python scripts/tox_env.py test ENV [PYTEST ARGS...]

Installing is offline (``--no-index``) from $RLF_WHEELHOUSE under constraints.txt, so an env can only
hold what the wheelhouse holds, and the rlf packages come from their wheels, not the source tree. A
plugin env installs ``rlf-plugin-<name>[test]`` and nothing else of rlf: whatever other rlf packages
appear must be declared dependencies, and the check after installing fails if any other is present.
"""

from __future__ import annotations

import filecmp
import importlib.metadata as metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import matrix  # noqa: E402
from matrix import FIXED_ENVS, ROOT, split_env  # noqa: E402

CONSTRAINTS = ROOT / "constraints.txt"
RELIABILITY_PLUGINS = ("random", "ppo", "dqn", "iql", "predator_prey", "a3c", "sac", "appo")
"""What tests/reliability trains: the issue's reports used these (ppo on CartPole with subprocess envs,
dqn and iql on predator-prey; dqn's actor processes and a3c's async workers killed mid-run; sac and appo
stopped by a signal and resumed); the rest of the matrix is integration's business."""
PYTEST_PATHS = {"core": ["tests/core"], "integration": ["tests/integration"], "reliability": ["tests/reliability"],
                "packaging": ["tests/packaging", "--ignore=tests/packaging/test_docker.py"]}


def fail(message: str) -> None:
    sys.exit(f"tox_env: {message}")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheelhouse() -> Path:
    path = Path(os.environ.get("RLF_WHEELHOUSE", ROOT / "wheelhouse"))
    if not any(path.glob("rlf-*.whl")):
        fail(f"no rlf wheel in {path}; build the wheelhouse first: scripts/build_wheels.sh {path}")
    return path


def plugin_distribution(plugin: str) -> str:
    return f"rlf-plugin-{plugin.replace('_', '-')}"


def env_requirements(env: str, path: Path) -> tuple[list[str], str]:
    """(pip requirements, the distribution whose declared closure is the only rlf allowed)."""
    if env == "core":
        return ["rlf[test]", "pytest"], "rlf"
    if env == "integration":
        return ["rlf[test]", "pytest", *matrix.requirements()], ""
    if env == "reliability":
        return ["rlf[test]", "pytest", *(matrix.requirement(p) for p in RELIABILITY_PLUGINS)], ""
    if env == "packaging":
        # scripts/release.py builds and checks every distribution offline; its test serves them from pypiserver
        return ["pytest", "build", "twine", "pypiserver", "setuptools>=68", "wheel"], ""
    plugin, numpy = split_env(env)
    if not (ROOT / "plugins" / plugin / "pyproject.toml").is_file():
        fail(f"env {env} tests plugins/{plugin}, which does not exist; add the plugin or drop it from "
             "tox.ini's env_list")
    dist = plugin_distribution(plugin)
    if not list(path.glob(f"{dist.replace('-', '_')}-*.whl")):
        fail(f"no {dist} wheel in {path}; rebuild it: scripts/build_wheels.sh")
    return [matrix.requirement(plugin), "pytest", *([numpy] if numpy else [])], dist


def installed_rlf() -> dict[str, metadata.Distribution]:
    found = {}
    for dist in metadata.distributions():
        name = normalize(dist.metadata["Name"] or "")
        if name == "rlf" or name.startswith("rlf-plugin-"):
            found[name] = dist
    return found


def declared_rlf_closure(root: str) -> set[str]:
    """``root`` and every rlf distribution it requires, transitively (its own test extra included)."""
    seen, todo = set(), [(root, True)]
    while todo:
        name, with_test = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in metadata.requires(name) or []:
            spec, _, marker = requirement.partition(";")
            extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
            if extra and not (with_test and extra.group(1) == "test"):
                continue
            dep = normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1))
            if dep == "rlf" or dep.startswith("rlf-plugin-"):
                todo.append((dep, False))
    return seen


def install(env: str) -> None:
    path = wheelhouse()
    reqs, root = env_requirements(env, path)
    stale = sorted(installed_rlf())
    if stale:  # a reused env must not keep old wheels of the same version, nor another env's plugins
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", *stale], check=True)
    # --no-compile: byte-compiling all of torch up front triples the install time; imports compile lazily
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--no-index",
                    "--find-links", str(path),
                    "-c", str(CONSTRAINTS), *reqs], check=True)
    check_installed(env, root)
    site = Path(sysconfig.get_paths()["purelib"])
    shared = share_identical_files(site, work_dir() / ".shared-files")
    print(f"tox_env: {env} shares {shared / 1e9:.2f} GB of installed files with other envs (hard links in "
          f"{work_dir() / '.shared-files'})", flush=True)


SHARED_MIN_BYTES = 1 << 16
"""Smaller files are not worth a link: torch, ray and the other heavy wheels are made of big ones."""


def work_dir() -> Path:
    return Path(os.environ.get("TOX_WORK_DIR", ROOT / ".tox"))


def share_identical_files(site: Path, store: Path) -> int:
    """Hard-link the files installed in ``site`` to one copy per content in ``store``, which every env of the
    matrix shares; returns the bytes this env now shares with earlier ones.

    Each env installs its own torch (0.8 GB) and ray: 16 GB in all for the whole matrix, which filled a CI
    machine's disk. Hard links keep every env complete and independent for Python (pip replaces files, it
    never rewrites them in place) while the disk holds each file once: the first env to install a content
    puts it in ``.tox/.shared-files`` (named by the hash pip recorded), later ones link to it once its bytes
    are compared equal. Where links are impossible (another file system) the env just keeps its copies.
    """
    store.mkdir(parents=True, exist_ok=True)
    shared = 0
    for dist in metadata.distributions(path=[str(site)]):
        for record in dist.files or []:
            if record.hash is None or (record.size or 0) < SHARED_MIN_BYTES:
                continue
            path = Path(dist.locate_file(record))
            key = store / f"{record.hash.mode}-{record.hash.value}-{record.size}"
            try:
                mine = path.stat()
                os.link(path, key)  # the first env with this content
                continue
            except FileNotFoundError:
                continue
            except FileExistsError:
                pass
            except OSError as error:  # e.g. EXDEV: the store is on another file system
                print(f"tox_env: keeping the env's own copies of installed files ({error})", flush=True)
                return shared
            theirs = key.stat()
            if theirs.st_ino == mine.st_ino or (theirs.st_size, theirs.st_mode) != (mine.st_size, mine.st_mode):
                continue
            if not filecmp.cmp(key, path, shallow=False):
                continue
            temporary = path.with_name(path.name + ".tox-env-link")
            os.link(key, temporary)
            os.replace(temporary, path)
            shared += mine.st_size
    return shared


def check_installed(env: str, root: str) -> None:
    present = installed_rlf()
    for name, dist in present.items():
        direct_url = dist.read_text("direct_url.json")
        if direct_url and json.loads(direct_url).get("dir_info", {}).get("editable"):
            fail(f"{name} is an editable install of the source tree; envs must install wheels")
    if root:
        expected = declared_rlf_closure(root)
        if set(present) != expected:
            extra, missing = sorted(set(present) - expected), sorted(expected - set(present))
            fail(f"env {env}: rlf packages {sorted(present)} are not exactly {root} and its declared "
                 f"dependencies {sorted(expected)} (extra: {extra}, missing: {missing})")
    print(f"tox_env: {env} holds " + ", ".join(f"{n} {d.version}" for n, d in sorted(present.items())), flush=True)


def check_core_without_torch() -> None:
    """The core env's claim: torch is absent, yet the core (torch_utils included) imports."""
    if importlib.util.find_spec("torch") is not None:
        fail("torch is installed in the core env; something in the core's dependencies pulls it in")
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        fail("`import torch` succeeded in the core env")
    import rlf.nn.torch_utils  # noqa: F401  (must import: torch is only imported inside its functions)

    try:
        rlf.nn.torch_utils.resolve_device("cpu")
    except ImportError:
        print("tox_env: core imports without torch; rlf.nn.torch_utils imports torch only when called", flush=True)
    else:
        fail("rlf.nn.torch_utils.resolve_device worked without torch")


def strict_plugins_load() -> None:
    """Every installed plugin loads from its wheel (a load error is fatal with --strict)."""
    rlf = Path(sys.executable).parent / "rlf"
    subprocess.run([str(rlf), "--strict", "plugins"], check=True)


def test(env: str, pytest_args: list[str]) -> None:
    if env == "core":
        check_core_without_torch()
    elif env != "packaging":
        strict_plugins_load()
    if env not in FIXED_ENVS:
        plugin, numpy = split_env(env)
        paths = [f"plugins/{plugin}/tests"]
        if numpy:
            import numpy as np

            major = int(np.__version__.split(".")[0])
            if (numpy == "numpy<2") != (major < 2):
                fail(f"env {env} wants {numpy} but has numpy {np.__version__}")
            print(f"tox_env: {env} runs with numpy {np.__version__}", flush=True)
    else:
        paths = PYTEST_PATHS[env]
    junit = work_dir() / "junit" / f"{env}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    # -P: the repo root must not shadow the installed wheels on sys.path
    # rlf_no_litter (scripts/pytest_plugins): a test that leaves a run directory in the repository fails
    command = [sys.executable, "-P", "-m", "pytest", "-p", "no:cacheprovider", "-p", "rlf_no_litter", "-ra",
               f"--junitxml={junit}", *paths, *pytest_args]
    plugins = str(ROOT / "scripts" / "pytest_plugins")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [plugins, os.environ.get("PYTHONPATH")]))}
    sys.exit(subprocess.run(command, cwd=ROOT, env=env).returncode)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[0] not in ("install", "test"):
        fail("usage: tox_env.py install ENV | test ENV [PYTEST ARGS...]")
    action, env, rest = argv[0], argv[1], argv[2:]
    if action == "install":
        install(env)
    else:
        test(env, rest)


if __name__ == "__main__":
    main(sys.argv[1:])

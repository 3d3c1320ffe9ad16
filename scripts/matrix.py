"""The test matrix as tox.ini declares it, for the scripts and tests that need it without tox installed.

tox.ini's ``env_list`` is the one list of environments; the plugin envs are the entries that are not
one of the fixed envs below. This module expands its brace factors the way tox 4 does.

    python scripts/matrix.py envs             every env, in env_list order
    python scripts/matrix.py plugins          plugin directories the matrix tests
    python scripts/matrix.py numpy1-plugins   plugins with a <name>-np1 env (need a numpy-1 wheel set)
    python scripts/matrix.py requirements     pip requirement of every plugin directory, [test] extra included
"""

from __future__ import annotations

import configparser
import itertools
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXED_ENVS = ("core", "integration", "reliability", "packaging", "lint", "docker")
NUMPY_FACTORS = {"np1": "numpy<2", "np2": "numpy>=2"}


def expand(entry: str) -> list[str]:
    """``mario-np{1,2}`` -> ``["mario-np1", "mario-np2"]``; several brace groups multiply."""
    parts = re.split(r"(\{[^}]*\})", entry)
    choices = [[c.strip() for c in p[1:-1].split(",")] if p.startswith("{") else [p] for p in parts]
    return ["".join(combo) for combo in itertools.product(*choices)]


def envs(tox_ini: Path = ROOT / "tox.ini") -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(tox_ini)
    raw = parser.get("tox", "env_list")
    # tox allows commas inside braces and between entries; split on commas outside braces only.
    entries = [e.strip() for line in raw.splitlines() for e in re.split(r",(?![^{]*\})", line)]
    return [env for entry in entries if entry and not entry.startswith("#") for env in expand(entry)]


def split_env(env: str) -> tuple[str, str | None]:
    """A plugin env name -> (plugin directory, numpy requirement or None)."""
    plugin, _, factor = env.partition("-")
    if factor and factor not in NUMPY_FACTORS:
        raise ValueError(f"env {env!r}: unknown factor {factor!r}; known: {', '.join(NUMPY_FACTORS)}")
    return plugin, NUMPY_FACTORS.get(factor)


def requirement(plugin: str) -> str:
    """``rlf-plugin-<name>``, with ``[test]`` where the plugin declares a test extra."""
    meta = tomllib.loads((ROOT / "plugins" / plugin / "pyproject.toml").read_text())["project"]
    extra = "[test]" if "test" in meta.get("optional-dependencies", {}) else ""
    return f"rlf-plugin-{plugin.replace('_', '-')}{extra}"


def requirements() -> list[str]:
    """The requirement of every plugin directory (built or not)."""
    return [requirement(p.parent.name) for p in sorted((ROOT / "plugins").glob("*/pyproject.toml"))]


def plugin_envs() -> list[str]:
    return [env for env in envs() if env not in FIXED_ENVS]


def plugins() -> list[str]:
    return sorted({split_env(env)[0] for env in plugin_envs()})


def numpy1_plugins() -> list[str]:
    return sorted({split_env(env)[0] for env in plugin_envs() if split_env(env)[1] == NUMPY_FACTORS["np1"]})


if __name__ == "__main__":
    commands = {"envs": envs, "plugins": plugins, "numpy1-plugins": numpy1_plugins, "requirements": requirements}
    if len(sys.argv) == 3 and sys.argv[1] == "requirement":
        print(requirement(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] in commands:
        print("\n".join(commands[sys.argv[1]]()))
    else:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(commands)} | requirement PLUGIN")

"""``rlf new algorithm|environment NAME``: write a complete, installable plugin from a template.

The templates ship inside the core (``rlf/templates/``) and are filled with ``string.Template``.
A template engine (copier, cookiecutter) would add a dependency tree to a core that must stay small,
for what is a handful of files with four names substituted: no prompts, no conditionals, no updates
of generated projects. The generated plugin is plain files the author owns from then on.
"""

from __future__ import annotations

import keyword
import re
import string
from importlib import resources
from pathlib import Path

from rlf.errors import ConfigError
from rlf.plugins.specs import API_VERSION

KINDS = ("algorithm", "environment")
_NAME = re.compile(r"^[a-z][a-z0-9]*([-_][a-z0-9]+)*$")
TEMPLATE_SUFFIX = ".tmpl"
PACKAGE_DIR = "PACKAGE"
"""The template folder and file-name part that becomes the plugin's Python package name."""


def names(name: str) -> dict[str, str]:
    """The names one plugin NAME stands for, as the templates use them."""
    snake = name.replace("-", "_")
    from rlf.version import __version__

    major, minor = (int(part) for part in __version__.split(".")[:2])
    return {
        "name": name,
        "package": f"rlf_plugin_{snake}",
        "dist": f"rlf-plugin-{name.replace('_', '-')}",
        "Class": "".join(part.capitalize() for part in re.split(r"[-_]", name)),
        "api_version": str(API_VERSION),
        "rlf_requirement": f"rlf>={major}.{minor},<{major}.{minor + 1}",
    }


def check_name(kind: str, name: str, directory: Path, registered: set[str]) -> None:
    """One ConfigError line for a name that cannot become a plugin, or that would overwrite something."""
    if kind not in KINDS:
        raise ConfigError(f"cannot make a plugin of kind {kind!r}; use `rlf new algorithm NAME` or "
                          "`rlf new environment NAME`")
    if not _NAME.match(name):
        hint = f" (try {_suggest(name)!r})" if _suggest(name) else ""
        raise ConfigError(f"plugin name {name!r} is not usable: use lowercase letters and digits, starting with a "
                          f"letter, parts joined by single '-' or '_'{hint}")
    if keyword.iskeyword(name.replace("-", "_")):
        raise ConfigError(f"plugin name {name!r} is a Python keyword; choose another name")
    if name in registered:
        raise ConfigError(f"an installed plugin already provides {name!r} (see `rlf list`); choose another name")
    if directory.exists():
        raise ConfigError(f"{directory} already exists; choose another name or --dir, or remove it")


def _suggest(name: str) -> str:
    cleaned = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    cleaned = re.sub(r"^[0-9-]+", "", cleaned)
    return cleaned if cleaned and _NAME.match(cleaned) else ""


def render(kind: str, name: str, directory: Path) -> list[Path]:
    """Write the ``kind`` template for ``name`` into ``directory`` (which must not exist)."""
    values = names(name)
    root = resources.files("rlf.cli") / "templates" / kind
    written: list[Path] = []

    def walk(node, relative: Path) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            target_name = child.name.replace(PACKAGE_DIR, values["package"])
            if child.is_dir():
                if child.name != "__pycache__":
                    walk(child, relative / target_name)
                continue
            if not child.name.endswith(TEMPLATE_SUFFIX):
                continue
            target = directory / relative / target_name.removesuffix(TEMPLATE_SUFFIX)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(string.Template(child.read_text()).substitute(values))
            written.append(target)

    directory.mkdir(parents=True)
    walk(root, Path())
    return written


def new_plugin(kind: str, name: str, parent: Path = Path(".")) -> tuple[Path, list[Path]]:
    """Check ``name``, then write ``parent/rlf-plugin-NAME``; returns the directory and its files."""
    from rlf.plugins.loading import registry

    directory = Path(parent) / names(name)["dist"] if _NAME.match(name) else Path(parent) / name
    reg = registry()
    check_name(kind, name, directory, set(reg.algorithms) | set(reg.environments) | set(reg.plugins))
    return directory, render(kind, name, directory)


def add_parser(sub) -> None:
    """Register ``rlf new`` on the CLI's subparsers."""
    new = sub.add_parser("new", help="write a new plugin (algorithm or environment) from a template",
                         description="Write a complete, installable plugin: pyproject with the entry point, "
                                     "config, builders, README and tests that pass at once.")
    new.add_argument("kind", choices=KINDS, help="what the plugin provides")
    new.add_argument("name", help="its registered name, e.g. my-algo (lowercase, digits, '-' or '_')")
    new.add_argument("--dir", type=Path, default=Path("."), help="folder to create rlf-plugin-NAME in (default: .)")


def run(args) -> int:
    directory, files = new_plugin(args.kind, args.name, args.dir)
    print(f"wrote {args.kind} plugin {args.name!r} in {directory} ({len(files)} files). Next:")
    print(f"  pip install -e '{directory}[test]' && pytest {directory}")
    if args.kind == "algorithm":
        print(f"  rlf train {args.name} --env gym:CartPole-v1 --steps 60000")
    else:
        print(f"  rlf config --env {args.name}")
    return 0

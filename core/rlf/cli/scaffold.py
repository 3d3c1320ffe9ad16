"""``rlf new KIND NAME``: write a complete, installable plugin from a template, for every kind of
plugin (algorithm, environment, strategy, collector, logger, callback).

The templates ship inside the core (``rlf/cli/templates/<template>/``) and are filled with ``string.Template``.
A template engine (copier, cookiecutter) would add a dependency tree to a core that must stay small,
for what is a handful of files with four names substituted: no prompts, no conditionals, no updates
of generated projects. An option that changes what is written (``--family off-policy``,
``--multi-agent``) picks another folder rather than a branch inside one, so every template stays a
plugin that can be read, and tested, as it will be written. The generated plugin is plain files the
author owns from then on.
"""

from __future__ import annotations

import keyword
import re
import string
from importlib import resources
from pathlib import Path

from rlf.errors import ConfigError
from rlf.plugins.specs import API_VERSION

KINDS = ("algorithm", "environment", "strategy", "collector", "logger", "callback")
FAMILIES = ("on-policy", "off-policy")
"""The strategy families ``rlf new algorithm --family`` has a template for (the first is the default)."""
RESERVED = {"collector": {"auto"}}
"""Names a kind cannot take although no plugin registers them (``run.vector=auto`` picks sync or async)."""
_NAME = re.compile(r"^[a-z][a-z0-9]*([-_][a-z0-9]+)*$")
TEMPLATE_SUFFIX = ".tmpl"
MAX_NAME = 64
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


def template(kind: str, family: str | None = None, multi_agent: bool = False) -> str:
    """The template folder for ``kind`` and its options; a ConfigError line for an option the kind lacks."""
    if kind not in KINDS:
        raise ConfigError(f"cannot make a plugin of kind {kind!r}; use `rlf new KIND NAME` with KIND one of "
                          f"{', '.join(KINDS)}")
    if family is not None and kind != "algorithm":
        raise ConfigError(f"--family is for `rlf new algorithm`, not {kind!r}; a new family is `rlf new strategy NAME`")
    if multi_agent and kind != "environment":
        raise ConfigError(f"--multi-agent is for `rlf new environment`, not {kind!r}")
    if family is not None and family not in FAMILIES:
        raise ConfigError(f"no algorithm template for family {family!r}; use one of {', '.join(FAMILIES)}")
    if family == "off-policy":
        return "algorithm-off-policy"
    return "environment-multi-agent" if multi_agent else kind


def check_name(kind: str, name: str, directory: Path, registered: set[str]) -> None:
    """One ConfigError line for a name that cannot become a plugin, or that would overwrite something."""
    template(kind)
    if len(name) > MAX_NAME:  # rlf-plugin-NAME and rlf_plugin_NAME must stay file names on every system
        raise ConfigError(f"plugin name {name[:20]!r}... is {len(name)} characters long; use at most {MAX_NAME}")
    if not _NAME.match(name):
        hint = f" (try {_suggest(name)!r})" if _suggest(name) else ""
        raise ConfigError(f"plugin name {name!r} is not usable: use lowercase letters and digits, starting with a "
                          f"letter, parts joined by single '-' or '_'{hint}")
    if keyword.iskeyword(name.replace("-", "_")):
        raise ConfigError(f"plugin name {name!r} is a Python keyword; choose another name")
    if name in RESERVED.get(kind, ()):
        raise ConfigError(f"{name!r} is reserved for {kind}s; choose another name")
    if name in registered:
        raise ConfigError(f"an installed plugin already provides {name!r} (see `rlf list`); choose another name")
    if directory.exists():
        raise ConfigError(f"{directory} already exists; choose another name or --dir, or remove it")


def _suggest(name: str) -> str:
    cleaned = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    cleaned = re.sub(r"^[0-9-]+", "", cleaned)
    return cleaned if cleaned and _NAME.match(cleaned) else ""


def render(folder: str, name: str, directory: Path) -> list[Path]:
    """Write the template ``folder`` for ``name`` into ``directory`` (which must not exist)."""
    values = names(name)
    root = resources.files("rlf.cli") / "templates" / folder
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


def new_plugin(kind: str, name: str, parent: Path = Path("."), family: str | None = None,
               multi_agent: bool = False) -> tuple[Path, list[Path]]:
    """Check ``name`` and the options, then write ``parent/rlf-plugin-NAME``; returns the directory and its files."""
    from rlf.plugins.loading import registry

    folder = template(kind, family, multi_agent)
    directory = Path(parent) / names(name)["dist"] if _NAME.match(name) else Path(parent) / name
    reg = registry()
    # one set for every kind: a strategy template also registers an algorithm of the same name, and a
    # name that means two things in `rlf list` confuses more than it saves
    taken = set(reg.plugins).union(reg.algorithms, reg.environments, reg.strategies, reg.collectors, reg.loggers,
                                   reg.callbacks)
    check_name(kind, name, directory, taken)
    return directory, render(folder, name, directory)


def add_parser(sub) -> None:
    """Register ``rlf new`` on the CLI's subparsers."""
    new = sub.add_parser("new", help="write a new plugin (algorithm, environment, strategy, collector, logger, "
                                     "callback) from a template",
                         description="Write a complete, installable plugin: pyproject with the entry point, "
                                     "config, code, README and tests that pass at once.")
    # no argparse `choices`: a wrong kind gets the one line, listing the kinds, that template() writes
    new.add_argument("kind", metavar="KIND", help=f"what the plugin provides: {', '.join(KINDS)}")
    new.add_argument("name", metavar="NAME", help="its registered name, e.g. my-algo (lowercase, digits, '-' or '_')")
    new.add_argument("--dir", type=Path, default=Path("."), help="folder to create rlf-plugin-NAME in (default: .)")
    new.add_argument("--family", metavar="FAMILY",
                     help=f"algorithm: the strategy family it runs on, {' or '.join(FAMILIES)} (default {FAMILIES[0]})")
    new.add_argument("--multi-agent", action="store_true",
                     help="environment: a PettingZoo parallel env (several agents) instead of a Gymnasium env")


NEXT = {
    "algorithm": "rlf train $name --env gym:CartPole-v1 --steps 60000",
    "algorithm-off-policy": "rlf train $name --env gym:FrozenLake-v1 --steps 60000",
    "environment": "rlf config --env $name",
    "environment-multi-agent": "rlf config --env $name",
    "strategy": "rlf train $name --env gym:CartPole-v1 --steps 60000",
    "collector": "rlf train ALGORITHM --set vector=$name",
    "logger": "rlf train ALGORITHM --set 'loggers=[\"csv\",\"$name\"]'",
    "callback": "rlf train ALGORITHM --set 'callbacks=[\"$name\"]'",
}
"""What to try once a template's plugin is installed (printed by `rlf new`)."""


def run(args) -> int:
    directory, files = new_plugin(args.kind, args.name, args.dir, args.family, args.multi_agent)
    print(f"wrote {args.kind} plugin {args.name!r} in {directory} ({len(files)} files). Next:")
    print(f"  pip install -e '{directory}[test]' && pytest {directory}")
    print("  " + string.Template(NEXT[template(args.kind, args.family, args.multi_agent)]).substitute(name=args.name))
    return 0

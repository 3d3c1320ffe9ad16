"""MkDocs hooks (mkdocs.yml ``hooks:``): pages generated from the code, and links that work both on
the repository's files and on the site.

* ``index.md`` is README.md, ``changelog.md`` CHANGELOG.md, and ``plugins/<name>.md`` each plugin's README: one source, not copies.
* ``reference/configs.md`` lists every field of every built-in plugin's config (their pydantic models,
  through the same registry and ``describe`` that ``rlf config`` uses), ``reference/cli.md`` the
  ``--help`` of every ``rlf`` subcommand. Plugins are loaded from the source tree, not from what is
  installed, so the site shows exactly this checkout.
* A relative link is resolved against its file's place in the repository and pointed at the page
  that file became (``docs/X.md`` -> ``X.md``, ``plugins/N/README.md`` -> ``plugins/N.md``); a link to
  another file of the repository (a compose file, a script) becomes its path in text; a link to
  anything else is left alone, so ``mkdocs build --strict`` reports it as broken.
* Optional pages (``SCALE.md``, ``results/``) join the navigation when they exist.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
import sys
import tomllib
from importlib import import_module
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PLUGINS = sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))
LINK = re.compile(r"(\[[^\]]*\]\()([^)\s]+)(\))")
_sources: dict[str, str] = {}  # site page path -> its file in the repository


def _repo_to_site(repo_path: str) -> str | None:
    if repo_path == "README.md":
        return "index.md"
    if repo_path == "CHANGELOG.md":
        return "changelog.md"
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    match = re.fullmatch(r"plugins/([^/]+)/README\.md", repo_path)
    return f"plugins/{match.group(1)}.md" if match else None


def on_config(config, **kwargs):
    docs = Path(config["docs_dir"])
    nav = config["nav"]
    plugin_pages = [{_title(p): f"plugins/{p.name}.md"} for p in PLUGINS]
    nav.append({"Plugins": plugin_pages})
    if (docs / "SCALE.md").is_file():
        nav.append({"Scaling": "SCALE.md"})
    results = sorted(docs.glob("results/*.md"))
    if results:
        index = docs / "results" / "README.md"
        nav.append({"Results": [str(p.relative_to(docs)) for p in ([index] if index.is_file() else [])]
                    + [str(p.relative_to(docs)) for p in results if p != index]})
    return config


def _title(plugin: Path) -> str:
    return tomllib.loads((plugin / "pyproject.toml").read_text())["project"]["name"]


def on_files(files: Files, config, **kwargs) -> Files:
    _sources.clear()
    for file in files.documentation_pages():
        _sources[file.src_uri] = f"docs/{file.src_uri}"

    def add(uri: str, content: str, source: str) -> None:
        files.append(File.generated(config, uri, content=content))
        _sources[uri] = source

    add("index.md", (ROOT / "README.md").read_text(), "README.md")
    add("changelog.md", (ROOT / "CHANGELOG.md").read_text(), "CHANGELOG.md")
    for plugin in PLUGINS:
        add(f"plugins/{plugin.name}.md", (plugin / "README.md").read_text(), f"plugins/{plugin.name}/README.md")
    add("reference/configs.md", configs_page(), "docs/reference/configs.md")
    add("reference/cli.md", cli_page(), "docs/reference/cli.md")
    return files


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    uri = page.file.src_uri
    source = _sources.get(uri, f"docs/{uri}")

    def fix(match: re.Match) -> str:
        target = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return match.group(0)
        path, hash_, fragment = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(source), path))
        site = _repo_to_site(resolved)
        if site is None:
            if path and (ROOT / resolved).is_file():  # a repository file, not a page: name it instead
                return f"{match.group(1)[1:-2]} (`{resolved}` in the repository)"
            return match.group(0)
        relative = posixpath.relpath(site, posixpath.dirname(uri) or ".")
        return f"{match.group(1)}{relative}{hash_}{fragment}{match.group(3)}"

    return LINK.sub(fix, markdown)


# -- generated pages ---------------------------------------------------------------------------------
def _source_registry():
    """The registry of this checkout's plugins, imported from plugins/*/src (installed ones ignored)."""
    for path in [ROOT / "core", *(p / "src" for p in PLUGINS)]:
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    from rlf.plugins import load_registry

    modules = []
    for plugin in PLUGINS:
        project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]
        for name, target in project.get("entry-points", {}).get("rlf", {}).items():
            modules.append((name, import_module(target)))
    saved = os.environ.get("RLF_LOAD_PLUGINS")
    os.environ["RLF_LOAD_PLUGINS"] = ""  # no installed entry points: only the source tree's plugins
    try:
        return load_registry(strict=True, extra_plugins=modules)
    finally:
        if saved is None:
            del os.environ["RLF_LOAD_PLUGINS"]
        else:
            os.environ["RLF_LOAD_PLUGINS"] = saved


def _table(model) -> list[str]:
    from rlf.config import describe

    rows = ["| key | default | type | description |", "|---|---|---|---|"]
    for path, type_name, default, doc in describe(model):
        shown = default if default == "(required)" else json.dumps(default, default=str)
        rows.append(f"| `{path}` | `{shown}` | {_cell(type_name)} | {_cell(doc)} |")
    return rows


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _first_line(model) -> str:
    return (model.__doc__ or model.__name__).strip().splitlines()[0]


def configs_page() -> str:
    from rlf.config import RunConfig

    registry = _source_registry()
    out = ["# Configs of the built-in plugins", "",
           "Generated from the pydantic models when the site is built (`rlf config ALGO --env ENV` prints the",
           "same for what is installed, with the values a run would use). Set a field with",
           "`--set algo.KEY=VALUE` / `--set env.KEY=VALUE`, or in the `[algo]` / `[env]` table of a",
           "`--config` file; run fields (`[run]`) bare or as `run.KEY`.", "",
           "## Run (every algorithm)", "", _first_line(RunConfig), "", *_table(RunConfig), "",
           "## Algorithms", ""]
    for name, spec in sorted(registry.algorithms.items()):
        family = getattr(spec.family, "value", spec.family)  # a strategy name (older cores: an enum)
        facts = [f"plugin `{spec.plugin}`", f"strategy `{family}`", f"actions: {', '.join(spec.action_spaces)}"]
        if spec.default_env:
            facts.append(f"default env `{spec.default_env}`")
        if spec.run_defaults:
            facts.append("run defaults " + ", ".join(f"`{k}={json.dumps(v)}`" for k, v in spec.run_defaults.items()))
        out += [f"### {name}", "", _first_line(spec.config), "", "; ".join(facts) + ".", "", *_table(spec.config), ""]
    out += ["## Environments", ""]
    for name, spec in sorted(registry.environments.items()):
        shown = f"{name}<id>" if spec.prefix else name
        out += [f"### {shown}", "", _first_line(spec.config), "", f"plugin `{spec.plugin}`.", "",
                *_table(spec.config), ""]
    # the other registries (strategy families, collectors, loggers, callbacks), where this core has them
    for title, attribute, section in (("Strategies", "strategies", "algo"), ("Collectors", "collectors", "collector"),
                                      ("Loggers", "loggers", "logger.NAME"), ("Callbacks", "callbacks", "callback.NAME")):
        table = getattr(registry, attribute, None) or {}
        if not table:
            continue
        out += [f"## {title}", "", f"Settings go in `[{section}]`." if section != "algo" else
                "Every algorithm of a strategy family has these fields too.", ""]
        for name, spec in sorted(table.items()):
            out += [f"### {name}", "", spec.description or _first_line(spec.config), "", f"plugin `{spec.plugin}`.", ""]
            out += [*_table(spec.config), ""] if spec.config.model_fields else ["No settings.", ""]
    return "\n".join(out)


def cli_page() -> str:
    from rlf.cli.commands import _parser

    parser = _parser()
    out = ["# Command line", "", "Every `rlf` command and its options, as `--help` prints them. Errors a user can fix",
           "are one line on stderr with exit code 2; Ctrl-C during training saves a checkpoint and exits 130.", "",
           "```text", _help(parser), "```", ""]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, command in sub.choices.items():
        out += [f"## rlf {name}", "", "```text", _help(command), "```", ""]
    return "\n".join(out)


def _help(parser: argparse.ArgumentParser) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # the same width wherever the site is built
    try:
        return parser.format_help().rstrip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved

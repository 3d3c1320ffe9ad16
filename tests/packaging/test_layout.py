"""The repository's packaging rules, checked on every plugin directory so a new plugin is born into them:
each is its own distribution rlf-plugin-<name> with exact dependencies, a light entry point and tests,
and tox.ini's plugin list (the one list the matrix is generated from) names exactly the plugin
directories."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import matrix  # noqa: E402

PLUGINS = sorted(p.parent.name for p in (ROOT / "plugins").glob("*/pyproject.toml"))
HEAVY_MODULES = {"torch", "nes_py", "gym_super_mario_bros", "gym", "cv2", "tensorboard", "ray"}


def project(plugin: str) -> dict:
    return tomllib.loads((ROOT / "plugins" / plugin / "pyproject.toml").read_text())["project"]


def requirement_name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1)).lower()


def test_tox_tests_exactly_the_plugin_directories():
    in_tox, on_disk = set(matrix.plugins()), set(PLUGINS)
    assert not on_disk - in_tox, f"plugins {sorted(on_disk - in_tox)} have no tox env: add them to tox.ini's env_list"
    assert not in_tox - on_disk, f"tox.ini tests {sorted(in_tox - on_disk)}, which have no plugins/<name>/"


def test_import_contracts_cover_every_plugin():
    linter = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    packages = {f"rlf_plugin_{plugin}" for plugin in PLUGINS}
    listed = set(linter["root_packages"])
    assert listed == {"rlf", *packages}, (
        f"[tool.importlinter] root_packages must be rlf and every plugin: add {sorted(packages - listed)}, "
        f"drop {sorted(listed - packages - {'rlf'})}")
    ray = next(c for c in linter["contracts"] if c.get("forbidden_modules") == ["ray"])
    assert set(ray["source_modules"]) == {"rlf", *packages} - {"rlf_plugin_ray"}, (
        "the Ray contract's source_modules must be the core and every plugin but rlf_plugin_ray")


def test_constraints_pin_the_cpu_torch_of_this_machine():
    lines = [line.strip() for line in (ROOT / "constraints.txt").read_text().splitlines()]
    assert "torch==2.13.0" in lines


@pytest.mark.parametrize("plugin", PLUGINS)
def test_plugin_is_a_standard_distribution(plugin: str):
    meta = project(plugin)
    assert meta["name"] == f"rlf-plugin-{plugin.replace('_', '-')}"
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert meta["version"] == core, f"{meta['name']} is version {meta['version']}; every distribution is {core}"
    assert meta["requires-python"] == ">=3.11"
    deps = meta.get("dependencies", [])
    major, minor = (int(part) for part in core.split(".")[:2])
    same_minor = f"rlf>={major}.{minor},<{major}.{minor + 1}"  # a minor release may change the plugin contract
    assert same_minor in deps, f"{meta['name']} must depend on {same_minor}, has {deps}"
    for dep in deps:
        name = requirement_name(dep)
        if name == "torch":
            assert "==" not in dep, f"{dep}: plugins declare a torch range; constraints.txt pins the build"
        if name.startswith("rlf-plugin-"):
            directory = name.removeprefix("rlf-plugin-").replace("-", "_")
            assert directory in PLUGINS, f"{meta['name']} depends on {name}, which no plugin directory builds"
    targets = list(meta["entry-points"]["rlf"].values())
    assert targets == [f"rlf_plugin_{plugin}.plugin"], targets
    assert (ROOT / "plugins" / plugin / "README.md").is_file()
    assert list((ROOT / "plugins" / plugin / "tests").glob("test_*.py")), f"plugins/{plugin}/tests has no tests"


@pytest.mark.parametrize("plugin", PLUGINS)
def test_plugin_entry_module_is_light_and_declares_the_api(plugin: str):
    source = ROOT / "plugins" / plugin / "src" / f"rlf_plugin_{plugin}" / "plugin.py"
    tree = ast.parse(source.read_text())
    top_level = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top_level |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            top_level.add(node.module.split(".")[0])
    assert not top_level & HEAVY_MODULES, f"{source} imports {top_level & HEAVY_MODULES} at module level"
    api = [n for n in tree.body if isinstance(n, ast.Assign)
           and any(getattr(t, "id", None) == "RLF_API_VERSION" for t in n.targets)]
    assert api and isinstance(api[0].value, ast.Constant) and api[0].value.value == 1, "RLF_API_VERSION = 1"


def test_no_run_artefacts_are_tracked_outside_the_published_results():
    # a test or a command that wrote a run into the checkout instead of a temporary directory leaves
    # these behind; published results and the Mario series' checkpoint snapshots are the exceptions
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    artefact = re.compile(r"(^|/)(run\.json|checkpoint[^/]*\.rlf|events\.out\.tfevents[^/]*|\.rlf\.lock)$")
    stray = [path for path in tracked.decode().split("\0")
             if artefact.search(path) and not path.startswith(("docs/results/", "experiments/"))]
    assert not stray, f"run artefacts tracked in the repository: {stray[:5]}"


CHECKPOINT_HOMES = ("docs/results/agents/", "experiments/snapshots/")
MAX_TRACKED_CHECKPOINT = 24 * 2**20
"""A shipped agent is a few MB and an in-progress snapshot's deflated checkpoint under 20 MB; a replay
buffer or a stack of finished runs' checkpoints would be far more."""


def test_checkpoints_and_agents_are_tracked_only_where_results_are_kept_and_stay_small():
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "-z", "*.rlf"], cwd=ROOT, capture_output=True, check=True).stdout
    files = [path for path in tracked.decode().split("\0") if path]
    assert files, "the shipped agents are tracked"
    elsewhere = [path for path in files if not path.startswith(CHECKPOINT_HOMES)]
    assert not elsewhere, f".rlf files outside {CHECKPOINT_HOMES}: {elsewhere[:5]} (docs/EXPERIMENTS.md, results data)"
    big = [path for path in files if (ROOT / path).is_file() and (ROOT / path).stat().st_size > MAX_TRACKED_CHECKPOINT]
    assert not big, f".rlf files over {MAX_TRACKED_CHECKPOINT >> 20} MiB: {big[:5]}"


def test_no_core_module_imports_another_ones_private_names():
    # a name used across modules is public and documented where it is defined; an underscore name is a
    # module's own, free to change without a look at the rest of the core
    import ast

    crossing = []
    for path in sorted((ROOT / "core" / "rlf").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlf"):
                crossing += [f"{path.relative_to(ROOT)}: {alias.name} from {node.module}" for alias in node.names
                             if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not crossing, crossing


def _core_import_graph() -> dict[str, set[str]]:
    """Every import between core modules, lazy ones inside functions and ``TYPE_CHECKING`` ones included:
    a cycle through an annotation still means neither module can be read, or moved, without the other."""
    import ast

    root = ROOT / "core"
    modules = {}
    for path in (root / "rlf").rglob("*.py"):
        if "templates" in path.parts:
            continue
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, node.module] if node.module else base) if node.level else node.module or ""
                for alias in node.names:
                    target = f"{module}.{alias.name}" if f"{module}.{alias.name}" in modules else module
                    if target in modules and target != name:
                        graph[name].add(target)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in modules and alias.name != name)
    return graph


def test_the_core_has_no_import_cycle_not_even_through_annotations_or_lazy_imports():
    graph = _core_import_graph()
    assert len(graph) > 60 and graph["rlf.training.trainer"], "the graph reads the core's imports"
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not cycles, f"core modules that import each other (directly or in a ring): {cycles}"

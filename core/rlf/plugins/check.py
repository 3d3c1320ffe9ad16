"""``rlf plugins --check``: import every builder the installed plugins registered.

Discovery never imports builders (that keeps ``rlf list`` fast), so a typo in a ``"module:function"``
string would otherwise show as fine until ``rlf train`` reached it. It also names installed plugins that
discovery cannot see, and warns about plugins whose loading imports a heavy package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rlf.errors import PluginError
from rlf.plugins.discovery import unseen_plugins
from rlf.plugins.specs import Registry, check_builders

# A fresh process that loads the one plugin and prints what `_watch_heavy` saw of it
_PROBE = """
import json, os, sys
from rlf.plugins.loading import load_registry
os.environ["RLF_LOAD_PLUGINS"] = sys.argv[1]
print(json.dumps(sorted(load_registry().heavy_imports.get(sys.argv[1], ()))))
"""
PROBE_TIMEOUT = 300


def broken_builders(registry: Registry) -> list[dict[str, str]]:
    """One row (plugin, what, builder, error) per builder that does not import, plus load errors and
    installed plugins that discovery cannot see."""
    rows = [{"plugin": name, "provides": "-", "builder": "-", "error": error}
            for name, error in sorted(registry.errors.items())]
    rows += [{"plugin": unseen.distribution, "provides": "-", "builder": "-",
              "error": f"installed but not loaded: {unseen.why}; {unseen.FIX}"} for unseen in unseen_plugins()]
    builders = [(spec.plugin, f"algorithm {name}", role, getattr(spec, role))
                for name, spec in sorted(registry.algorithms.items()) for role in ("build_agent", "build_learner")]
    builders += [(spec.plugin, f"environment {name}", "build_env", spec.build_env)
                 for name, spec in sorted(registry.environments.items())]
    for plugin, provides, role, builder in builders:
        try:
            check_builders(builder)
        except PluginError as exc:
            rows.append({"plugin": plugin, "provides": f"{provides} ({role})",
                         "builder": getattr(builder, "reference", repr(builder)), "error": str(exc)})
    return rows


def heavy_imports(registry: Registry) -> dict[str, list[str]]:
    """Per plugin, the heavy packages its loading imports: as this process's discovery recorded them, and
    for a plugin that loaded after one was imported already, as a fresh process loading it alone sees."""
    from concurrent.futures import ThreadPoolExecutor

    found = {name: sorted(heavy) for name, heavy in registry.heavy_imports.items()}
    unmeasured = [name for name in sorted(registry.heavy_unmeasured)
              if name not in found and registry.plugins[name].distribution and name != "rlf"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, sys.path))}
    env.pop("RLF_STRICT_PLUGINS", None)

    def probe(name: str) -> list[str]:
        try:
            done = subprocess.run([sys.executable, "-c", _PROBE, name], env=env, text=True,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT)
            return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else []
        except (subprocess.TimeoutExpired, ValueError, IndexError):  # no answer: nothing to say about it
            return []

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        probed = zip(unmeasured, pool.map(probe, unmeasured), strict=True)
        found.update((name, heavy) for name, heavy in probed if heavy)
    return dict(sorted(found.items()))


def check_plugins(registry: Registry, as_json: bool = False) -> int:
    """Print the findings; 0 when every plugin loaded and every builder imports, else 2. A plugin that
    imports a heavy package as it loads is a warning (stderr): it works, slowly."""
    heavy = heavy_imports(registry)
    rows = broken_builders(registry)
    if as_json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        count = 2 * len(registry.algorithms) + len(registry.environments)
        print(f"{len(registry.plugins)} plugins loaded; all {count} builders import")
    for row in rows if not as_json else []:
        print(f"{row['plugin']:<18} {row['provides']}: {row['error']}")
    for name, packages in heavy.items():
        print(f"rlf: warning: plugin {name!r} imports {', '.join(packages)} as it loads (its entry module or "
              "its registration hooks), so every rlf command, `rlf list` included, waits for it; import them "
              "only in the builders, named as \"module:function\" strings (docs/plugin-guide/index.md)", file=sys.stderr)
    if rows:
        print(f"rlf: error: {len(rows)} plugin problem(s) found; reinstall, fix or uninstall the plugins "
              "named above", file=sys.stderr)
        return 2
    return 0

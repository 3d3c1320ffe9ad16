"""``rlf plugins --check``: import every builder the installed plugins registered.

Discovery never imports builders (that keeps ``rlf list`` fast), so a typo in a ``"module:function"``
string would otherwise show as fine until ``rlf train`` reached it.
"""

from __future__ import annotations

import json
import sys

from rlf.errors import PluginError
from rlf.plugins.specs import Registry, check_builders


def broken_builders(registry: Registry) -> list[dict[str, str]]:
    """One row (plugin, what, builder, error) per builder that does not import, plus load errors."""
    rows = [{"plugin": name, "provides": "-", "builder": "-", "error": error}
            for name, error in sorted(registry.errors.items())]
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


def check_plugins(registry: Registry, as_json: bool = False) -> int:
    """Print the findings; 0 when every plugin loaded and every builder imports, else 2."""
    rows = broken_builders(registry)
    if as_json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        count = 2 * len(registry.algorithms) + len(registry.environments)
        print(f"{len(registry.plugins)} plugins loaded; all {count} builders import")
    for row in rows if not as_json else []:
        print(f"{row['plugin']:<18} {row['provides']}: {row['error']}")
    if rows:
        print(f"rlf: error: {len(rows)} plugin problem(s) found; reinstall, fix or uninstall the plugins "
              "named above", file=sys.stderr)
        return 2
    return 0

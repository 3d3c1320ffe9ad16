"""Package exports that import their module on first use.

Discovery imports every plugin's package, and ``import rlf`` happens in every ``rlf`` command, so a
package that re-exported its torch- or Gymnasium-backed names eagerly would make ``rlf list`` pay
for them. Each such package declares its exports once and gets its ``__getattr__`` from here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

Target = str | tuple[str, str | None]
"""``"submodule"`` (the attribute of the same name) or ``("submodule", attribute)``; attribute
``None`` exports the submodule itself. Submodules are relative to the package."""


def lazy_exports(package: str, exports: Mapping[str, Target]) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` for ``package``: ``__getattr__ = lazy_exports(__name__, {...})``."""

    def __getattr__(name: str) -> Any:
        try:
            target = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module_name, attribute = (target, name) if isinstance(target, str) else target
        module = import_module(f".{module_name}", package)
        value = module if attribute is None else getattr(module, attribute)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    return __getattr__

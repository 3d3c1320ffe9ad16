"""The names plugins import stay what they are once the whole core is loaded: a lazily exported
function must not be shadowed by a submodule of the same name (``rlf.resolve`` was, once
``rlf/resolve.py`` existed and something imported it)."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

import rlf

MODULE_EXPORTS = {("rlf", "checkpoint"), ("rlf", "torch_utils")}
"""Exports that are modules on purpose."""

PACKAGES = ["rlf", "rlf.envs", "rlf.nn", "rlf.plugins"]


def _import_every_core_module() -> None:
    for info in pkgutil.walk_packages(rlf.__path__, "rlf."):
        if ".templates" not in info.name:
            importlib.import_module(info.name)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_export_resolves_and_is_not_shadowed_by_a_submodule(package):
    _import_every_core_module()
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        if (package, name) not in MODULE_EXPORTS:
            assert not isinstance(value, types.ModuleType), f"{package}.{name} is the module {value.__name__}"


def test_importing_rlf_and_discovering_plugins_imports_neither_torch_nor_the_training_loop():
    code = ("import sys, rlf; rlf.registry(); "
            "print(sorted(m for m in ('torch', 'rlf.training.trainer', 'rlf.api') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

"""The names plugins import stay what they are once the whole core is loaded: a lazily exported
function must not be shadowed by a submodule of the same name (``rlf.resolve`` was, once
``rlf/resolve.py`` existed and something imported it). Runs with torch absent, as the core env does."""

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

PACKAGES = ["rlf", "rlf.envs", "rlf.nn", "rlf.plugins", "rlf.cli"]

NEEDS_TORCH = {"rlf.nn.networks", "rlf.nn.numpy_mlp", "rlf.nn.onnx_export"}
"""The only core modules that import torch at import time: the network toolkit plugins build on (and its
numpy acting path), and the ONNX exporter, which only `rlf export RUN FILE.onnx` loads (the core never imports either on its own)."""


@pytest.mark.parametrize("package", PACKAGES)
def test_no_export_is_named_like_a_submodule(package):
    module = importlib.import_module(package)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    exports = set(module.__all__)
    clashes = {name for name in exports & submodules if (package, name) not in MODULE_EXPORTS}
    assert not clashes, f"{package} exports {sorted(clashes)}, which importing its submodules would replace"


def test_every_export_resolves_after_the_whole_core_is_loaded():
    missing_torch = set()
    for info in pkgutil.walk_packages(rlf.__path__, "rlf."):
        if ".templates" in info.name:
            continue
        try:
            importlib.import_module(info.name)
        except ModuleNotFoundError as exc:
            assert exc.name == "torch", f"{info.name}: {exc}"
            missing_torch.add(info.name)
    assert missing_torch <= NEEDS_TORCH
    for name in rlf.__all__:
        value = getattr(rlf, name)
        if ("rlf", name) not in MODULE_EXPORTS:
            assert not isinstance(value, types.ModuleType), f"rlf.{name} is the module {value.__name__}"


def test_importing_rlf_and_discovering_plugins_imports_neither_torch_nor_the_training_loop():
    code = ("import sys, rlf; rlf.registry(); "
            "print(sorted(m for m in ('torch', 'rlf.training.trainer', 'rlf.api') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

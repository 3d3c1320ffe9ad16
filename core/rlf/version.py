"""The core's version, importable without importing the package's API (plugin discovery reads it)."""

__version__ = "0.2.0"

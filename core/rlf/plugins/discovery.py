"""What is installed, read from package metadata without importing any plugin: the entry-point group
rlf loads from, the subset ``RLF_LOAD_PLUGINS`` asks for, and installed distributions that look like rlf
plugins but that discovery cannot see (a near-miss group name, no entry points).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from importlib.metadata import Distribution, distributions, entry_points

ENTRY_POINT_GROUP = "rlf"


def requested_plugins() -> set[str] | None:
    """The entry point names RLF_LOAD_PLUGINS limits loading to, or None when it is unset."""
    raw = os.environ.get("RLF_LOAD_PLUGINS")
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


@dataclass(frozen=True)
class Unseen:
    """An installed distribution that looks like an rlf plugin but that discovery cannot see."""

    distribution: str
    version: str | None
    why: str
    """What is wrong with it, e.g. "declares its entry points in group 'rlf.plugins', not 'rlf'"."""

    FIX = ("rlf loads plugins only from entry-point group 'rlf' ([project.entry-points.rlf] in pyproject.toml); "
           "fix its packaging and reinstall it")

    def line(self) -> str:
        return f"{self.distribution} {self.version or ''}".rstrip() + f" is installed but {self.why}: {self.FIX}"


def near_miss_group(group: str) -> bool:
    """An entry-point group meant to be ``rlf``: "rlf.plugins", "rlf_plugins", "RLF", "rfl", "rlf-algorithms"."""
    if group == ENTRY_POINT_GROUP:
        return False
    squashed = re.sub(r"[^a-z0-9]", "", group.lower())
    return (squashed.startswith("rlf") or sorted(squashed) == sorted("rlf")
            or bool(difflib.get_close_matches(squashed, ["rlf", "rlfplugin", "rlfplugins"], n=1, cutoff=0.8)))


def _key(dist: Distribution) -> str:
    # the name as pip normalizes it, from the .dist-info directory's name where Python offers it: reading
    # every distribution's METADATA would cost `rlf plugins` a second on a full environment
    name = getattr(dist, "_normalized_name", None) or dist.metadata["Name"] or ""
    return re.sub(r"[-_.]+", "_", name).lower()


def unseen_plugins() -> list[Unseen]:
    """Installed distributions rlf cannot see: an ``rlf-plugin-*`` with no entry point in group ``rlf``, and
    any distribution with entry points in a group whose name is close to it (``near_miss_group``)."""
    everything = entry_points()
    seen = {_key(ep.dist) for ep in everything.select(group=ENTRY_POINT_GROUP) if ep.dist is not None}
    groups: dict[str, tuple[Distribution, set[str]]] = {}
    for group in everything.groups:
        if near_miss_group(group):
            for ep in everything.select(group=group):
                if ep.dist is not None and _key(ep.dist) not in seen:
                    groups.setdefault(_key(ep.dist), (ep.dist, set()))[1].add(group)
    found = {key: Unseen(dist.metadata["Name"] or key, dist.version,
                         f"declares its entry points in group {', '.join(map(repr, sorted(named)))}, "
                         f"not {ENTRY_POINT_GROUP!r}")
             for key, (dist, named) in groups.items()}
    for dist in distributions():
        key = _key(dist)
        if key.startswith("rlf_plugin_") and key not in seen and key not in found:
            found[key] = Unseen(dist.metadata["Name"] or key, dist.version,
                                f"declares no entry point in group {ENTRY_POINT_GROUP!r}")
    return sorted(found.values(), key=lambda unseen: unseen.distribution.lower())

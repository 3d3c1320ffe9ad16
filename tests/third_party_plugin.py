"""A third-party plugin written only against rlf's public API, as an outside author would: it adds a
collector (and the tests load it through an entry point, so nothing in the core knows it).

The entry module stays light; the collector itself lives in ``third_party_collector`` and is named
by string, so discovery does not import Gymnasium.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

import rlf


class CountingCollectorConfig(rlf.CollectorConfig):
    """Where the counting collector reports what it stepped."""

    report: Path | None = Field(None, description="JSON file written at close: envs built, steps, resets.")
    seed_offset: int = Field(0, ge=0, description="Added to every reset seed.")


class ThirdPartyPlugin:
    RLF_API_VERSION = rlf.API_VERSION

    @rlf.hookimpl
    def rlf_register_collectors(self, register: rlf.RegisterCollector):
        register("counting", build_collector="third_party_collector:build_counting_collector",
                 config=CountingCollectorConfig, description="in-process envs that count their steps")


plugin = ThirdPartyPlugin()

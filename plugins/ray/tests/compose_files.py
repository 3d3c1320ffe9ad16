"""Reading docker/compose.yaml as the tests need it: its commands with compose's interpolation done,
and the ports each role's `ray start` pins (the namespace cluster test runs those very commands)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "docker" / "compose.yaml"
NODE_PORTS = ("node-manager-port", "object-manager-port", "runtime-env-agent-port", "dashboard-agent-grpc-port",
              "dashboard-agent-listen-port", "metrics-export-port", "min-worker-port", "max-worker-port")
HEAD_PORTS = ("port", "ray-client-server-port", "dashboard-port")
LOCAL_ONLY = ("dashboard-port",)
"""Pinned, but for the head's own machine only: no other node connects there."""


def fill(text: str, **variables: str) -> str:
    """Compose's interpolation: ${VAR:-default} (the default unless given) and $$ for a literal $."""
    text = re.sub(r"(?<!\$)\$\{(\w+):-([^}]*)\}", lambda m: variables.get(m.group(1), m.group(2)), text)
    return text.replace("$$", "$")


def services(path: Path = COMPOSE) -> dict:
    return yaml.safe_load(path.read_text())["services"]  # resolves the x-ray-node anchor as compose does


def command(service: str, **variables: str) -> list[str]:
    """A service's entrypoint and command, interpolated: what its container runs."""
    spec = services()[service]
    return [fill(part, **variables) for part in [*spec["entrypoint"], *spec.get("command", [])]]


def start_flags(service: str, **variables: str) -> dict[str, str]:
    """The --flag=value options of the `ray start` a service runs."""
    return dict(re.findall(r"--([a-z-]+)=(\S+)", " ".join(command(service, **variables))))


def open_ports(service: str) -> list[str]:
    """What other nodes connect to on a node of this role, as nft port expressions ("6380", "12000-12999")."""
    flags = start_flags(service)
    single = [flags[name] for name in (*NODE_PORTS[:6], *HEAD_PORTS) if name in flags and name not in LOCAL_ONLY]
    return [*single, f"{flags['min-worker-port']}-{flags['max-worker-port']}"]

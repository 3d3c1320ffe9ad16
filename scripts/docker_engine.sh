#!/usr/bin/env bash
# Makes sure a Docker engine answers. Where none does (this kind of machine starts none and cannot pull
# images), runs the workplace's ../shared/docker/engine.sh beside the repository, which starts one and
# provides local stand-ins for python:3.11-slim and debian:bookworm-slim. It must run as root.
# Builds and runs against that engine need --network host.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if docker info >/dev/null 2>&1; then
  echo "docker_engine: an engine answers; using it" >&2
  exit 0
fi
script=${RLF_DOCKER_ENGINE_SCRIPT:-$root/../shared/docker/engine.sh}
if [[ ! -f $script ]]; then
  echo "docker_engine: no Docker engine answers and $script does not exist: start Docker and retry" >&2
  exit 1
fi
echo "docker_engine: no engine answers; starting one with $script" >&2
bash "$script"

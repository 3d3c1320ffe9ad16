#!/usr/bin/env bash
# Builds docker/Dockerfile (or another Dockerfile) offline, with every wheel from the wheelhouse:
#
#   scripts/docker_build.sh [TAG] [DOCKERFILE]     defaults: rlf, docker/Dockerfile
#
# It stages a clean build context (the files git tracks or would track, plus wheelhouse/) because the
# legacy builder ignores docker/Dockerfile.dockerignore and would upload .tox/ and .venv/ whole, and it
# passes --build-arg OFFLINE=1 --network host (no package index inside the build; host networking is
# what the engine here supports). With network access a plain `docker build -f docker/Dockerfile -t rlf .`
# does the same job (docs/DOCKER.md).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=${1:-rlf}
dockerfile=${2:-docker/Dockerfile}
wheelhouse=${RLF_WHEELHOUSE:-$root/wheelhouse}
if ! compgen -G "$wheelhouse/torch-*.whl" >/dev/null; then
  echo "docker_build: no torch wheel in $wheelhouse; run scripts/build_wheels.sh first (it takes torch from" \
       "where your pip looks, e.g. PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu: docs/INSTALL.md)" >&2
  exit 1
fi
stage=$(mktemp -d "${TMPDIR:-/tmp}/rlf-docker-context.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cd "$root"
# files deleted from the work tree but still tracked are skipped
git ls-files -z --cached --others --exclude-standard \
  | while IFS= read -r -d '' file; do [[ -f $file ]] && printf '%s\0' "$file"; done \
  | xargs -0 -r cp --parents -t "$stage"
mkdir -p "$stage/wheelhouse"
cp -l "$wheelhouse"/*.whl "$stage/wheelhouse/" 2>/dev/null || cp "$wheelhouse"/*.whl "$stage/wheelhouse/"
echo "docker_build: context $(du -sh "$stage" | cut -f1); building $dockerfile as $tag" >&2
docker build --network host --build-arg OFFLINE=1 -f "$stage/$dockerfile" -t "$tag" "$stage"

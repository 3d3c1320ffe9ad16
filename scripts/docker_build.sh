#!/usr/bin/env bash
# Builds docker/Dockerfile (or another Dockerfile) offline, with every wheel from the wheelhouse:
#
#   scripts/docker_build.sh [TAG] [DOCKERFILE]     defaults: rlf, docker/Dockerfile
#
# It stages a clean build context (the files git tracks or would track, plus wheelhouse/, with the
# Dockerfile's ignore file as .dockerignore) because the legacy builder ignores docker/Dockerfile.dockerignore
# and would upload .tox/ and .venv/ whole, and it
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
# The Dockerfile's own ignore file, under the one name the legacy builder reads, so the engine is sent
# only what the build reads (not docs/, tests or the experiment snapshots); BuildKit reads it as it is.
if [[ -f $dockerfile.dockerignore ]]; then cp "$dockerfile.dockerignore" "$stage/.dockerignore"; fi
echo "docker_build: context $(du -sh "$stage" | cut -f1); building $dockerfile as $tag" >&2
build=(docker build --network host --build-arg OFFLINE=1 -f "$stage/$dockerfile")
previous=$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
# Leave nothing behind but the image: the legacy builder keeps a multi-stage build's `build` stage as an
# untagged image (2.6 GB here), and every rebuild leaves the previous image untagged (1.7 GB), which
# filled the disk of a machine that builds on each CI run. Building the stage under a tag of its own
# first (the full build then takes it from the cache) lets it be removed by name with its layers.
if grep -qiE '^FROM[[:space:]].*[[:space:]]AS[[:space:]]+build[[:space:]]*$' "$stage/$dockerfile"; then
  stage_tag="$tag-build-stage"
  trap 'docker rmi "$stage_tag" >/dev/null 2>&1 || true; rm -rf "$stage"' EXIT
  # a run killed before its exit trap (a CI job stopped at its time limit) leaves the stage tagged; the new
  # stage build takes the tag and would leave that image untagged for good
  previous_stage=$(docker image inspect -f '{{.Id}}' "$stage_tag" 2>/dev/null || true)
  "${build[@]}" --target build -t "$stage_tag" "$stage"
  current_stage=$(docker image inspect -f '{{.Id}}' "$stage_tag")
  if [[ -n $previous_stage && $previous_stage != "$current_stage" ]]; then
    docker rmi "$previous_stage" >/dev/null 2>&1 || true
  fi
fi
"${build[@]}" -t "$tag" "$stage"
current=$(docker image inspect -f '{{.Id}}' "$tag")
# by id: fails (and keeps it) where a container or another tag still uses the previous image
if [[ -n $previous && $previous != "$current" ]] && docker rmi "$previous" >/dev/null 2>&1; then
  echo "docker_build: removed the previous $tag image (${previous:7:12}), which the new one untagged" >&2
fi

#!/usr/bin/env bash
# Builds the wheelhouse that tox, the wheelhouse test and the Docker image install from, offline:
#   1. wheels of the core and of every plugin under plugins/*/ (rebuilt each time: same version, new code);
#   2. torch 2.13.0 from wherever this pip is configured to look (pip.conf, PIP_INDEX_URL,
#      PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS: on this project's machines a CPU wheel on local disk; elsewhere
#      e.g. PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu), checked first to be no CUDA build
#      (scripts/check_torch.py; RLF_ALLOW_CUDA_TORCH=1 to want one), and nes-py 8.2.1, compiled here
#      once (it has no wheel on PyPI; needs g++);
#   3. every third-party wheel those need, setuptools/wheel so the Docker build can build offline, and the
#      release tools the packaging env runs (build, twine, pypiserver: scripts/release.py and its test);
#   4. a second, numpy-1 set for the plugins that tox also tests under numpy 1 (<name>-np1 envs).
# Re-running is cheap: wheels already in the wheelhouse are reused, not rebuilt or downloaded.
#
#   scripts/build_wheels.sh [WHEELHOUSE]      default: wheelhouse/ at the repository root
#   PYTHON=/path/to/python scripts/build_wheels.sh   (default python3)
#   PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/build_wheels.sh   (a machine without
#   a local torch wheel: Linux's default torch on PyPI is the CUDA build, which the check refuses)
set -euo pipefail
start=$SECONDS

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
wheelhouse=${1:-${RLF_WHEELHOUSE:-$root/wheelhouse}}
mkdir -p "$wheelhouse"
wheelhouse=$(cd "$wheelhouse" && pwd)
python=${PYTHON:-python3}
pip=("$python" -m pip --disable-pip-version-check)
pinned=(-c "$root/constraints.txt")
say() { echo "build_wheels: [$((SECONDS - start)) s] $*" >&2; }


mapfile -t plugin_dirs < <(find "$root/plugins" -mindepth 2 -maxdepth 2 -name pyproject.toml -printf '%h\n' | sort)
say "project: the core and ${#plugin_dirs[@]} plugins: $(basename -a "${plugin_dirs[@]}" | tr '\n' ' ')"
rm -f "$wheelhouse"/rlf-*.whl "$wheelhouse"/rlf_*.whl
# setuptools keeps build/lib between builds, and would package files deleted from the source since
clean_build_dirs() { rm -rf "$root/build" "${plugin_dirs[@]/%//build}"; }
clean_build_dirs
trap clean_build_dirs EXIT
# One isolated build env per project costs minutes; the build python's own setuptools will do if recent.
isolation=()
if "$python" -c 'import setuptools, wheel, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 68)' 2>/dev/null; then
  isolation=(--no-build-isolation)
fi
"${pip[@]}" wheel -q --no-deps "${isolation[@]}" "${pinned[@]}" --wheel-dir "$wheelhouse" "$root" "${plugin_dirs[@]}"

say "torch (from where this pip looks, no CUDA build unless asked) and nes-py 8.2.1 (compiled once)"
if ! compgen -G "$wheelhouse/torch-*.whl" >/dev/null; then
  # metadata only: a CUDA build is refused before its gigabytes are downloaded
  "$python" "$root/scripts/check_torch.py" "${pinned[@]}" >&2
  "${pip[@]}" download -q --no-deps "${pinned[@]}" --dest "$wheelhouse" torch
fi
"${pip[@]}" wheel -q --no-deps "${pinned[@]}" --find-links "$wheelhouse" --wheel-dir "$wheelhouse" nes-py==8.2.1

# each plugin with its test extra, where it declares one
mapfile -t plugin_reqs < <("$python" "$root/scripts/matrix.py" requirements)
say "third-party dependencies of all of them"
"${pip[@]}" wheel -q "${pinned[@]}" --find-links "$wheelhouse" --wheel-dir "$wheelhouse" \
  "rlf[test,video]" "${plugin_reqs[@]}" pytest "setuptools>=68" wheel build twine pypiserver

for name in $("$python" "$root/scripts/matrix.py" numpy1-plugins); do
  [[ -f $root/plugins/$name/pyproject.toml ]] || continue
  say "numpy-1 dependencies of rlf-plugin-${name//_/-}"
  "${pip[@]}" wheel -q "${pinned[@]}" --find-links "$wheelhouse" --wheel-dir "$wheelhouse" \
    "numpy<2" "rlf[test]" "$("$python" "$root/scripts/matrix.py" requirement "$name")" pytest
done

if [[ ${RLF_ALLOW_CUDA_TORCH:-0} != 1 ]] && compgen -G "$wheelhouse/nvidia_*.whl" >/dev/null; then
  say "CUDA wheels (nvidia_*) reached the wheelhouse: a dependency pulled a CUDA torch; remove them and point pip at the CPU index (docs/INSTALL.md), or set RLF_ALLOW_CUDA_TORCH=1"
  exit 1
fi
say "done in $((SECONDS - start)) s: $(find "$wheelhouse" -name '*.whl' | wc -l) wheels, $(du -sh "$wheelhouse" | cut -f1) in $wheelhouse"

#!/usr/bin/env bash
# The project's test command (the README's, and CI's through .ci/run):
#
#   scripts/test.sh                  the whole tox matrix (docs/TESTING.md)
#   scripts/test.sh -e core,ppo      some envs only (any `tox run-parallel` option passes through)
#
# 0. the system tools the tests need (scripts/system_tools.sh: installed as root with apt-get, else it
# stops naming them); 1. a tools venv (.tools/) with tox; 2. the wheelhouse (scripts/build_wheels.sh); 3. every tox env,
# RLF_TOX_PARALLEL (default 3) at a time: two CPU-bound envs on the two cores, plus the docker env, which
# mostly waits on the network and the disk (each env runs torch on one thread); 4. per-env wall times and one closing line summing every
# env's pytest results, `N passed, N failed[, N skipped]`, below the skipped tests with their reasons. Exits non-zero if anything failed,
# including an env that failed outside pytest (pytest's exit 5 for "no tests" counts as a failure).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tools=${RLF_TOOLS_VENV:-$root/.tools}
export RLF_WHEELHOUSE=${RLF_WHEELHOUSE:-$root/wheelhouse}
start=$SECONDS

bash scripts/system_tools.sh "$@"  # exits 2 naming a tool it cannot install
if [[ ! -x $tools/bin/tox ]]; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt "tox>=4.23,<5" \
    "setuptools>=68" wheel
fi
"$tools/bin/tox" --version
# the matrix needs about 6 GB here (docs/TESTING.md); a full disk shows up as odd errors deep in pip or tox
free_disk() { df -Pk . | awk 'NR == 2 { printf "%.1f GB free", $4 / 1048576 }'; }
echo "test.sh: $(free_disk) at the start"

PYTHON=$tools/bin/python bash scripts/build_wheels.sh "$RLF_WHEELHOUSE" \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
echo "test.sh: wheelhouse ready after $((SECONDS - start)) s"

rm -rf .tox/junit .tox/result.json
tox_status=0
"$tools/bin/tox" run-parallel --parallel "${RLF_TOX_PARALLEL:-3}" --parallel-no-spinner \
  --result-json .tox/result.json "$@" || tox_status=$?
echo "test.sh: tox finished with status $tox_status after $((SECONDS - start)) s in all; $(free_disk)"
if [[ ! -f .tox/result.json ]]; then
  echo "test.sh: tox wrote no results"
  echo "0 passed, 1 failed"
  exit 1
fi
summary_status=0
python3 scripts/summarize.py .tox/result.json .tox/junit || summary_status=$?
if (( tox_status != 0 || summary_status != 0 )); then exit 1; fi

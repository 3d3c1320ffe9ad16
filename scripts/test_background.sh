#!/usr/bin/env bash
# The tests pass however they are started. A script's `cmd &` and `nohup` start a job with SIGINT and
# SIGQUIT (and under nohup SIGHUP) ignored and stdin from /dev/null, and those dispositions reach every
# test process; a test that relied on the ones it inherited failed there and only there. CI (.ci/run)
# runs, after the whole matrix, one short env again in exactly that mode: started from this
# non-interactive script as `nohup tox run -e ENV < /dev/null &`, then waited for. It exits non-zero when
# the env fails, and when the job did not start with those signals ignored (then it would prove nothing).
#
#   scripts/test_background.sh [ENV]   default core (the stop-signal tests are among its ~330; about a
#                                      minute once scripts/test.sh has made the tools venv and wheelhouse)
#
# (stdin closed outright, `<&-`, is what tests/core/test_signals_however_started.py runs the signal tests
# with; tox itself cannot start without a stdin, so the env gets /dev/null as a background job does.)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tools=${RLF_TOOLS_VENV:-$root/.tools}
export RLF_WHEELHOUSE=${RLF_WHEELHOUSE:-$root/wheelhouse}
env=${1:-core}
if [[ ! -x $tools/bin/tox ]]; then
  echo "test_background.sh: no $tools/bin/tox; run scripts/test.sh first (it makes the tools venv and the wheelhouse)" >&2
  exit 2
fi

log=$(mktemp)
probe=$(mktemp)
trap 'rm -f "$log" "$probe"' EXIT
start=$SECONDS
# the job notes the signals it ignores (/proc's SigIgn mask, as its processes inherit it), then becomes tox
nohup bash -c 'grep "^SigIgn:" /proc/self/status > "$0"; exec "$@"' "$probe" "$tools/bin/tox" run -e "$env" \
  < /dev/null > "$log" 2>&1 &
status=0
wait $! || status=$?
elapsed=$((SECONDS - start))

mask=$(awk '{ print $2 }' "$probe")
# SIGHUP, SIGINT, SIGQUIT are signals 1-3: bits 0-2 of the mask
if [[ -z $mask ]] || (( (16#$mask & 7) != 7 )); then
  echo "test_background.sh: the job did not start with SIGHUP, SIGINT and SIGQUIT ignored (SigIgn: ${mask:-unread}); run this from a non-interactive shell" >&2
  exit 1
fi
if (( status != 0 )); then
  tail -n 200 "$log"
  echo "test_background.sh: env $env FAILED (exit $status) as a background job under nohup (SIGINT, SIGQUIT, SIGHUP ignored, stdin /dev/null) after $elapsed s"
  exit 1
fi
tail -n 5 "$log"
echo "test_background.sh: env $env passed as a background job under nohup (SIGINT, SIGQUIT, SIGHUP ignored, stdin /dev/null) in $elapsed s"

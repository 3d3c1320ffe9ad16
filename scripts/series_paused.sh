#!/bin/bash
# Run one command while the Mario series is paused, for a measurement on free cores:
#   bash scripts/series_paused.sh python benchmarks/report.py --only ppo-mario
# The series' `rlf experiment` processes (and their children) get SIGSTOP first and SIGCONT when the command
# ends, however it ends; nothing of theirs is lost, their wall clock just includes the pause.
pids=$(pgrep -f "rlf experiment experiments/mario-1-1.toml")
all="$pids"
for p in $pids; do all="$all $(pgrep -P "$p" | tr '\n' ' ')"; done
trap 'kill -CONT $all 2>/dev/null' EXIT
[ -n "$pids" ] && kill -STOP $all 2>/dev/null
"$@"

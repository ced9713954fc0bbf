#!/usr/bin/env bash
# Runs an `onitb generate` command with its progress (stderr) in LOG and
# kills it (SIGKILL, as a crash would) as soon as a progress line matches
# PATTERN (an extended regular expression, `grep -E`, like the A/B
# scripts' own stop lines: "depth 8 plies, [0-9]+ states"); returns once
# it is gone. For the 8-men A/B scripts, which time a run up to a point or
# keep its work directory there as a kit.
#
# usage: scripts/run-until.sh PATTERN LOG ONITB ARGS...
set -euo pipefail
pattern=${1:?usage: scripts/run-until.sh PATTERN LOG ONITB ARGS...}
log=${2:?usage: scripts/run-until.sh PATTERN LOG ONITB ARGS...}
shift 2
# Made here, not by the redirection below, so that the first look for the
# line finds it.
: > "$log"
"$@" 2> "$log" > /dev/null &
pid=$!
while kill -0 "$pid" 2> /dev/null; do
  if tr '\r' '\n' < "$log" | grep -Eq -e "$pattern"; then
    kill -9 "$pid"
    break
  fi
  sleep 0.2
done
wait "$pid" 2> /dev/null || true

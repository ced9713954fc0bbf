#!/usr/bin/env bash
# Runs an `onitb generate` command with its progress (stderr) in LOG and
# kills it (SIGKILL, as a crash would) as soon as 4v4 starts; returns once
# it is gone. For the 8-men A/B scripts, which time everything before 4v4.
#
# usage: scripts/run-until-4v4.sh LOG ONITB ARGS...
set -euo pipefail
log=${1:?usage: scripts/run-until-4v4.sh LOG ONITB ARGS...}
shift
# Made here, not by the redirection below, so that the first look for 4v4
# finds it.
: > "$log"
"$@" 2> "$log" > /dev/null &
pid=$!
while kill -0 "$pid" 2> /dev/null; do
  if tr '\r' '\n' < "$log" | grep -q "4v4: started"; then
    kill -9 "$pid"
    break
  fi
  sleep 0.2
done
wait "$pid" 2> /dev/null || true

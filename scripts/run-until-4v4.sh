#!/usr/bin/env bash
# Runs an `onitb generate` command with its progress (stderr) in LOG and
# kills it (SIGKILL, as a crash would) as soon as 4v4 starts; returns once
# it is gone. For the 8-men A/B scripts, which time everything before 4v4.
#
# usage: scripts/run-until-4v4.sh LOG ONITB ARGS...
set -euo pipefail
exec "$(dirname "$0")/run-until.sh" "4v4: started" "$@"

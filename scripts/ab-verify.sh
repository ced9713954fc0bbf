#!/usr/bin/env bash
# A/B benchmark of `onitb verify` on a noisy machine: builds revision BASE
# and the working tree in release mode, then runs `onitb verify ARGS...`
# with each in turn, interleaved, for ROUNDS rounds, and reports each run's
# CPU time (user + sys), wall time and peak RSS from /usr/bin/time, the
# per-round CPU ratio (this / base) and the medians. Fails if either
# verification fails.
#
# usage: scripts/ab-verify.sh BASE ROUNDS verify-args...
#   scripts/ab-verify.sh 187801a 2 --deep /tmp/t6
#   scripts/ab-verify.sh 187801a 3 --deep --sample 20000 --seed 3 /tmp/t6
set -euo pipefail
base_rev=${1:?usage: scripts/ab-verify.sh BASE ROUNDS verify-args...}
rounds=${2:?usage: scripts/ab-verify.sh BASE ROUNDS verify-args...}
shift 2
cd "$(dirname "$0")/.."
source scripts/ab-common.sh
ab_start "$base_rev"
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    /usr/bin/time -v "$scratch/onitb.$which" verify "$@" >"$scratch/out" 2>"$scratch/time" ||
      { cat "$scratch/out" "$scratch/time" >&2; exit 1; }
    ab_row "$round" "$which" "$scratch/time" "$scratch/rows"
  done
done
ab_summary "$scratch/rows"

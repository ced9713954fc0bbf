#!/usr/bin/env bash
# A/B benchmark on a noisy machine: builds revision BASE and the working
# tree in release mode, then runs `onitb generate` with each in turn,
# interleaved (base first in odd rounds, this first in even ones), for
# ROUNDS rounds, and reports each run's CPU time (user +
# sys), wall time and peak RSS from /usr/bin/time, the per-round CPU ratio
# (this / base) and the medians. Ends by checking that both tables are
# identical file for file.
#
# With --mem among the extra arguments (a streamed run), each run gets a
# fresh work directory in the scratch directory.
#
# usage: scripts/ab-generate.sh BASE [ROUNDS] [MEN] [extra generate args...]
#   scripts/ab-generate.sh afe66ec 3 6
#   scripts/ab-generate.sh afe66ec 3 6 --mem 32MiB --no-move loss
set -euo pipefail
base_rev=${1:?usage: scripts/ab-generate.sh BASE [ROUNDS] [MEN] [extra generate args...]}
rounds=${2:-3}
men=${3:-6}
shift $(( $# > 3 ? 3 : $# )) || true
cd "$(dirname "$0")/.."
source scripts/ab-common.sh
ab_start "$base_rev"
for round in $(seq 1 "$rounds"); do
  for which in $(ab_order "$round"); do
    rm -rf "$scratch/out.$which" "$scratch/work.$which"
    work=()
    if [[ " $* " == *" --mem "* ]]; then work=(--work "$scratch/work.$which"); fi
    /usr/bin/time -v "$scratch/onitb.$which" generate --men "$men" --out "$scratch/out.$which" --quiet "${work[@]}" "$@" \
      >/dev/null 2>"$scratch/time"
    ab_row "$round" "$which" "$scratch/time" "$scratch/rows"
  done
done
ab_summary "$scratch/rows"
if diff <(cd "$scratch/out.base" && find . -type f -exec sha256sum {} + | sort -k2) \
        <(cd "$scratch/out.this" && find . -type f -exec sha256sum {} + | sort -k2) >/dev/null; then
  echo "tables: identical"
else
  echo "tables: DIFFER" >&2
  exit 1
fi

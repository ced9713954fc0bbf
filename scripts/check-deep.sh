#!/usr/bin/env bash
# Correctness sweep beyond the reference solver's reach: generates the
# MEN-men table (release build, in memory) for SETS card sets spread evenly
# over the 4368 sets of the base cards (lexicographic order, from OFFSET, as
# scripts/check-card-sets.sh picks them), under both no-move rules, and has
# `onitb verify --deep` re-derive every value from its successors with the
# rules' own move generator (no solver code). Prints one line per table:
# the cards, the rule, the whole table's counts, the check's verdict and
# both wall times. At 6 men, on a 2-core machine, 35-70 s to generate a
# table (about 20 s for a mirror-closed set such as the default) and 45-70
# s to check it. Too slow for every change, so not in .ci/run.
#
# usage: scripts/check-deep.sh [SETS] [MEN] [OFFSET]
#   scripts/check-deep.sh 4 6 11
set -euo pipefail
sets=${1:-4}
men=${2:-6}
offset=${3:-0}
cd "$(dirname "$0")/.."
source scripts/check-common.sh
build_and_scratch
all_card_sets
failed=0
for k in $(seq 0 $((sets - 1))); do
  set=${all[$(((offset + k * ${#all[@]} / sets) % ${#all[@]}))]}
  for rule in pass loss; do
    rm -rf "$work/table"
    start=$(date +%s.%N)
    "$bin" generate --men "$men" --cards "$set" --no-move "$rule" --out "$work/table" --quiet >"$work/stats"
    generated=$(date +%s.%N)
    if "$bin" verify --deep "$work/table" >"$work/deep" 2>&1; then verdict=ok; else verdict=FAILED; failed=1; fi
    checked=$(date +%s.%N)
    counts=$(awk '$1 == "all" {print "states " $2 ", win in 1 " $3 ", wins " $4 ", losses " $5 ", draws " $6 ", longest win " $7 ", longest loss " $8}' "$work/stats")
    times=$(awk -v s="$start" -v g="$generated" -v c="$checked" 'BEGIN { printf "generate %.1f s, check %.1f s", g - s, c - g }')
    printf '%s\t%s\t%s\tdeep check %s\t%s\n' "$set" "$rule" "$counts" "$verdict" "$times"
    [[ $verdict == ok ]] || tail -3 "$work/deep"
  done
done
exit "$failed"

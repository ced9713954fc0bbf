#!/usr/bin/env bash
# How deep do the tables of the card sets go? Generates the MEN-men table
# (release build, in memory) of SETS card sets spread evenly over the 4368
# sets of the base cards (lexicographic order, from OFFSET, as
# scripts/check-deep.sh picks them; SETS=4368 is every set) under the no-move
# RULE, two tables at a time with one worker thread each, and appends one
# line per set to OUT:
#   cards <tab> rule <tab> longest win plies <tab> longest loss plies
# Tables deeper than a value byte holds (a loss past 252 plies, src/value.rs)
# are made with two-byte values, in memory, and listed like the others (up to
# session 63 they were refused: such lines read `too deep` and the solver's
# message in place of the plies). Sets already in OUT are skipped, so an
# interrupted survey goes on where it stopped. Ends with the ten deepest sets,
# then any refused.
# On a 2-core machine: every set at 4 men in 28 min; at 6 men, about 2.5
# min a set (the twelve deepest in 28 min).
#
# SETS may instead name a file with one card set per line, e.g. the deepest
# sets of a survey at fewer men: those sets are surveyed.
#
# usage: scripts/survey-depths.sh MEN RULE OUT [SETS | SETS_FILE] [OFFSET]
#   scripts/survey-depths.sh 4 pass target/depths-4-pass.tsv
#   sort -t "$(printf '\t')" -k4,4nr target/depths-4-pass.tsv | head -12 | cut -f1 >target/deep-sets
#   scripts/survey-depths.sh 6 pass target/depths-6-pass.tsv target/deep-sets
set -euo pipefail
if (($# < 3)); then
  echo "usage: scripts/survey-depths.sh MEN RULE OUT [SETS | SETS_FILE] [OFFSET]" >&2
  exit 2
fi
men=$1
rule=$2
out=$3
sets=${4:-4368}
offset=${5:-0}
out=$(realpath "$out")
[[ -f $sets ]] && sets=$(realpath "$sets")
cd "$(dirname "$0")/.."
source scripts/check-common.sh
build_and_scratch
if [[ -f $sets ]]; then
  mapfile -t all <"$sets"
  sets=${#all[@]}
  offset=0
else
  all_card_sets
fi
touch "$out"

# survey_share SHARE: the sets k with k % 2 == SHARE, one after another.
survey_share() {
  local share=$1 k set table line
  for ((k = share; k < sets; k += 2)); do
    set=${all[$(((offset + k * ${#all[@]} / sets) % ${#all[@]}))]}
    if grep -q "^$set	$rule	" "$out"; then continue; fi
    table="$work/table-$share"
    rm -rf "$table"
    if "$bin" generate --men "$men" --cards "$set" --no-move "$rule" --threads 1 --quiet \
      --out "$table" >"$work/stats-$share" 2>&1; then
      line=$(awk -v s="$set" -v r="$rule" '$1 == "all" {print s "\t" r "\t" $7 "\t" $8}' "$work/stats-$share")
    elif grep -q "too deep\|deeper than" "$work/stats-$share"; then
      line="$set	$rule	too deep	$(tail -1 "$work/stats-$share")"
    else
      echo "$set: generate failed:" >&2
      cat "$work/stats-$share" >&2
      return 1
    fi
    # One short line per append: the two shares' lines do not interleave.
    echo "$line" >>"$out"
  done
}
survey_share 0 &
first=$!
survey_share 1
wait "$first"

echo "$(grep -c "	$rule	" "$out") sets surveyed at $men men, rule $rule; the deepest losses:"
# Sorted into a file, not piped into head: under pipefail, head closing the
# pipe early would fail the script.
grep "	$rule	" "$out" | grep -v "	too deep	" | sort -t '	' -k4,4nr >"$work/sorted"
head -10 "$work/sorted"
grep "	$rule	too deep	" "$out" || true

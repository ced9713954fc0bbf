#!/usr/bin/env bash
# Instruction counts, which this shared machine's noise cannot disturb:
# builds revision BASE and the working tree in release mode
# (scripts/ab-build.sh), runs `onitb generate` with each once under
# callgrind, on one worker thread, with branch simulation, and prints per
# binary the instructions executed and the conditional branches
# mispredicted, the ratios this / base, and whether the two tables are
# identical. For changes of a few percent, which the CPU-time A/B
# (scripts/ab-generate.sh) cannot tell from the machine's +-10% per run.
# Instructions and mispredictions are not time: cache misses are not
# counted, and at 4 men the cache holds the whole table. Confirm a change
# with scripts/ab-generate.sh at 6 men (session 43: value bytes blended
# under a mask had 23% fewer mispredictions here and were 5% slower at 6
# men, where the loads they added missed the cache).
# Under callgrind a 4-men run took 9.3 s here (0.37 s natively); the
# whole script took 44 s here, builds included.
#
# usage: scripts/ab-instructions.sh BASE [MEN] [extra generate args...]
#   scripts/ab-instructions.sh HEAD 4
#   scripts/ab-instructions.sh HEAD 4 --cards Boar,Ox,Elephant,Tiger,Crab
#   scripts/ab-instructions.sh HEAD 4 --mem 1MiB     (streamed: 25 groups, many batches)
set -euo pipefail
base_rev=${1:?usage: scripts/ab-instructions.sh BASE [MEN] [extra generate args...]}
men=${2:-4}
shift $(( $# > 2 ? 2 : $# )) || true
if ! command -v valgrind >/dev/null; then
  echo "ab-instructions: valgrind is not installed (Debian: apt-get install valgrind)" >&2
  exit 1
fi
cd "$(dirname "$0")/.."
scratch=$(mktemp -d -p "$PWD/target")
trap 'rm -rf "$scratch"' EXIT
scripts/ab-build.sh "$base_rev" "$scratch"
printf 'binary\tinstructions\tmispredicted\n'
for which in base this; do
  # With --mem among the extra arguments (a streamed run), each binary gets
  # a work directory of its own.
  work=()
  if [[ " $* " == *" --mem "* ]]; then work=(--work "$scratch/work.$which"); fi
  valgrind --tool=callgrind --branch-sim=yes --callgrind-out-file="$scratch/callgrind.$which" \
    "$scratch/onitb.$which" generate --men "$men" --out "$scratch/out.$which" --quiet --threads 1 "${work[@]}" "$@" \
    >/dev/null 2>"$scratch/valgrind.$which"
  instructions=$(awk '/I +refs:/ {gsub(/,/, "", $NF); print $NF}' "$scratch/valgrind.$which")
  mispredicted=$(awk '/Mispredicts:/ {gsub(/,/, "", $5); print $5}' "$scratch/valgrind.$which")
  printf '%s\t%s\t%s\n' "$which" "$instructions" "$mispredicted" | tee -a "$scratch/rows"
done
awk '$1 == "base" {i = $2; m = $3} $1 == "this" {printf "ratio this/base: instructions %.4f, mispredicted %.4f\n", $2 / i, $3 / m}' \
  "$scratch/rows"
source scripts/check-common.sh
if shards=$(same_shards "$scratch/out.base" "$scratch/out.this"); then
  echo "tables: identical ($shards shards)"
else
  echo "tables: DIFFER" >&2
  exit 1
fi

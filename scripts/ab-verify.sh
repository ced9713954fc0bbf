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
scratch=$(mktemp -d -p "$PWD/target")
trap 'rm -rf "$scratch"' EXIT
scripts/ab-build.sh "$base_rev" "$scratch"
field() { awk -F': ' -v key="$1" '$0 ~ key {print $2}' "$2"; }
seconds() { awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }'; }
printf 'round\tbinary\tcpu_s\twall_s\tmax_rss_kib\n'
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    /usr/bin/time -v "$scratch/onitb.$which" verify "$@" >"$scratch/out" 2>"$scratch/time" ||
      { cat "$scratch/out" "$scratch/time" >&2; exit 1; }
    cpu=$(awk -v u="$(field 'User time' "$scratch/time")" -v s="$(field 'System time' "$scratch/time")" \
      'BEGIN { print u + s }')
    wall=$(field 'Elapsed \\(wall clock\\)' "$scratch/time" | seconds)
    rss=$(field 'Maximum resident' "$scratch/time")
    printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$which" "$cpu" "$wall" "$rss" | tee -a "$scratch/rows"
  done
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
for which in base this; do
  printf 'median\t%s\t%s\t%s\t%s\n' "$which" \
    "$(awk -v w="$which" '$2 == w {print $3}' "$scratch/rows" | median)" \
    "$(awk -v w="$which" '$2 == w {print $4}' "$scratch/rows" | median)" \
    "$(awk -v w="$which" '$2 == w {print $5}' "$scratch/rows" | median)"
done
echo "CPU ratio this/base per round:"
awk '$2 == "base" {b[$1] = $3} $2 == "this" {printf "  round %s: %.3f\n", $1, $3 / b[$1]}' "$scratch/rows"

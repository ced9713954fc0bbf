#!/usr/bin/env bash
# A/B benchmark on a noisy machine: builds revision BASE and the working
# tree in release mode, then runs `onitb generate` with each in turn,
# interleaved, for ROUNDS rounds, and reports each run's CPU time (user +
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
root=$PWD
scratch=$(mktemp -d -p "$root/target")
trap 'rm -rf "$scratch"' EXIT
scripts/ab-build.sh "$base_rev" "$scratch"
field() { awk -F': ' -v key="$1" '$0 ~ key {print $2}' "$2"; }
seconds() { awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }'; }
printf 'round\tbinary\tcpu_s\twall_s\tmax_rss_kib\n'
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    rm -rf "$scratch/out.$which" "$scratch/work.$which"
    work=()
    if [[ " $* " == *" --mem "* ]]; then work=(--work "$scratch/work.$which"); fi
    /usr/bin/time -v "$scratch/onitb.$which" generate --men "$men" --out "$scratch/out.$which" --quiet "${work[@]}" "$@" \
      >/dev/null 2>"$scratch/time"
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
if diff <(cd "$scratch/out.base" && find . -type f -exec sha256sum {} + | sort -k2) \
        <(cd "$scratch/out.this" && find . -type f -exec sha256sum {} + | sort -k2) >/dev/null; then
  echo "tables: identical"
else
  echo "tables: DIFFER" >&2
  exit 1
fi

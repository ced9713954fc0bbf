#!/usr/bin/env bash
# A/B benchmark of writing the 8-men table's shards after a streamed run
# (unpacking every material's packed values from the work directory and
# compressing them at level 3, 51 GB of values):
# builds revision BASE and the working tree in release mode, runs
# `onitb generate --men 8 --mem 1GiB --no-move loss --compress 3` (as
# scripts/bench-8men.sh) with the working tree's binary until it starts
# writing the table (about 24 minutes; the work directory is kept in
# WORKDIR/solved and reused by later calls), then per round resumes a copy
# of it with each binary in turn, to the end. The copy's files are dropped
# from the page cache first, as a real run's packed values (written with
# O_DIRECT) are not in it. Reports the wall and CPU time of each resumed
# run: opening the run, then the shards.
#
# Both binaries must read the same checkpoint version.
#
# usage: scripts/ab-8men-shards.sh BASE [ROUNDS] [WORKDIR]
#   scripts/ab-8men-shards.sh HEAD~1 2 /work/scratch/abs
# WORKDIR needs about 15 GB free, and 6 GB more while a round runs
# (default: a directory under target/).
set -euo pipefail
base_rev=${1:?usage: scripts/ab-8men-shards.sh BASE [ROUNDS] [WORKDIR]}
rounds=${2:-1}
cd "$(dirname "$0")/.."
scratch=${3:-$PWD/target/ab-8men-shards}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
scripts/ab-build.sh "$base_rev" "$scratch"
args=(generate --men 8 --mem 1GiB --no-move loss --compress 3)
ready="$scratch/solved"
if [ ! -f "$ready/.complete" ]; then
  rm -rf "$ready" "$scratch/t8"
  scripts/run-until.sh '] writing ' "$scratch/solved.log" "$scratch/onitb.this" "${args[@]}" --work "$ready" \
    --out "$scratch/t8"
  grep -q '\] writing ' "$scratch/solved.log" || { echo "the run ended before it wrote the table" >&2; exit 1; }
  rm -rf "$scratch/t8" "$scratch"/t8.*
  touch "$ready/.complete"
fi
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    dir="$scratch/$which.$round"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$ready" "$dir/work"
    rm "$dir/work/.complete"
    # Written back and dropped from the page cache (dd's nocache drops a
    # file's clean pages).
    sync
    for f in "$dir/work"/*; do dd if="$f" iflag=nocache count=0 status=none; done
    /usr/bin/time -v -o "$dir/time.txt" "$scratch/onitb.$which" "${args[@]}" --work "$dir/work" --out "$dir/t8" \
      --resume 2> "$dir/progress.log" > /dev/null
    user=$(awk -F': ' '/User time/ {print $2}' "$dir/time.txt")
    sys=$(awk -F': ' '/System time/ {print $2}' "$dir/time.txt")
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time.txt")
    echo "== round $round, $which: wall $wall, cpu $(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }') s (user $user, sys $sys)"
    rm -rf "$dir"
  done
done

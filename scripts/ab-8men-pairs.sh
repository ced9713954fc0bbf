#!/usr/bin/env bash
# A/B benchmark of the streamed steps at 8 men without 4v4 (two thirds of
# the run, 25-30 minutes):
# builds revision BASE and the working tree in release mode, then runs
# `onitb generate --men 8 --mem 1GiB --no-move loss --compress 3` (as
# scripts/bench-8men.sh) with each in turn
# (ROUNDS rounds, interleaved) and stops each run when 4v4 starts (about
# 10 minutes: every pair up to 3v4+4v3). Reports per run the wall time to
# that point, each streamed pair's closing line (plies, and where its steps'
# time went) and the work-file bytes read and written so far.
#
# usage: scripts/ab-8men-pairs.sh BASE [ROUNDS] [WORKDIR]
#   scripts/ab-8men-pairs.sh 98d61e8 1 /work/scratch/ab8
# WORKDIR needs about 20 GB free (default: a directory under target/).
set -euo pipefail
base_rev=${1:?usage: scripts/ab-8men-pairs.sh BASE [ROUNDS] [WORKDIR]}
rounds=${2:-1}
cd "$(dirname "$0")/.."
root=$PWD
scratch=${3:-$root/target/ab-8men}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
scripts/ab-build.sh "$base_rev" "$scratch"
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    dir="$scratch/$which.$round"
    rm -rf "$dir"
    mkdir -p "$dir"
    start=$(date +%s.%N)
    scripts/run-until-4v4.sh "$dir/progress.log" "$scratch/onitb.$which" generate --men 8 --mem 1GiB \
      --no-move loss --compress 3 --work "$dir/work" --out "$dir/t8"
    end=$(date +%s.%N)
    echo "== round $round, $which: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s to 4v4's start"
    tr '\r' '\n' < "$dir/progress.log" | grep ": done after" || true
    tr '\r' '\n' < "$dir/progress.log" | grep -o "work files: read [^,]*, written [^,(]*" | tail -1
    rm -rf "$dir/work"
  done
done

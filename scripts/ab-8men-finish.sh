#!/usr/bin/env bash
# A/B benchmark of finishing a streamed pair at 8 men (3v4+4v3: applying
# the decision logs and packing 11.2e9 value bytes):
# builds revision BASE and the working tree in release mode, runs
# `onitb generate --men 8 --mem 1GiB --no-move loss --compress 3` (as
# scripts/bench-8men.sh) with the working tree's binary until the
# checkpoint records 3v4+4v3's steps as over (about 10 minutes; kept in
# WORKDIR/steps-over and reused by later calls), then per round resumes a
# copy of that work directory with each binary in turn and stops it when
# 4v4 starts. Reports the wall time from the resume to 4v4's start: the
# finishing of both materials, and opening the run.
#
# Both binaries must read the same checkpoint version.
#
# usage: scripts/ab-8men-finish.sh BASE [ROUNDS] [WORKDIR]
#   scripts/ab-8men-finish.sh 16122bd 3 /work/scratch/abf
# WORKDIR needs about 30 GB free (default: a directory under target/).
set -euo pipefail
base_rev=${1:?usage: scripts/ab-8men-finish.sh BASE [ROUNDS] [WORKDIR]}
rounds=${2:-1}
cd "$(dirname "$0")/.."
root=$PWD
scratch=${3:-$root/target/ab-8men-finish}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
scripts/ab-build.sh "$base_rev" "$scratch"
args=(generate --men 8 --mem 1GiB --no-move loss --compress 3)
ready="$scratch/steps-over"
if [ ! -f "$ready/checkpoint.json" ] || ! grep -q '"steps_done":true' "$ready/checkpoint.json"; then
  rm -rf "$ready"
  "$scratch/onitb.this" "${args[@]}" --work "$ready" --out "$scratch/t8" 2> "$scratch/steps-over.log" > /dev/null &
  pid=$!
  # The record that names 3v4+4v3's steps as over; the pair is not
  # finished yet (it is in "pair", not in "finished").
  while kill -0 "$pid" 2> /dev/null; do
    if grep -q '"steps_done":true' "$ready/checkpoint.json" 2> /dev/null \
      && grep -q '"materials":\[\[3,4\]' "$ready/checkpoint.json"; then
      kill -9 "$pid"
      break
    fi
    sleep 0.3
  done
  wait "$pid" 2> /dev/null || true
  grep -q '"steps_done":true' "$ready/checkpoint.json" || { echo "no checkpoint with 3v4+4v3's steps over" >&2; exit 1; }
fi
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    dir="$scratch/$which.$round"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$ready" "$dir/work"
    start=$(date +%s.%N)
    scripts/run-until-4v4.sh "$dir/progress.log" "$scratch/onitb.$which" "${args[@]}" \
      --work "$dir/work" --out "$dir/t8" --resume
    end=$(date +%s.%N)
    echo "== round $round, $which: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s from the resume to 4v4's start"
    rm -rf "$dir"
  done
done

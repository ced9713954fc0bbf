#!/usr/bin/env bash
# Checks crash safety at a size `cargo test` cannot afford: generates the
# table in memory, then streamed under SIZE with a checkpoint after every
# step, kills the streamed run with SIGKILL once its checkpoint is past
# depth DEPTH of the last (largest) pair, resumes it, and compares every
# shard with cmp. tests/resume.rs does the same at 4 men. Extra arguments
# go to every `onitb generate` (the three runs must agree on them).
#
# usage: scripts/check-resume.sh [MEN] [SIZE] [DEPTH] [extra generate args...]
#   scripts/check-resume.sh 6 32MiB 20
#   scripts/check-resume.sh 6 32MiB 60 --cards Cobra,Dragon,Monkey,Ox,Rooster --no-move loss
set -euo pipefail
men=${1:-6}
size=${2:-32MiB}
depth=${3:-20}
shift $(( $# > 3 ? 3 : $# )) || true
cd "$(dirname "$0")/.."
source scripts/check-common.sh
build_and_scratch
half=$((men / 2))
last="[[${half},${half}]]"
"$bin" generate --men "$men" --out "$work/memory" --quiet "$@" >/dev/null
"$bin" generate --men "$men" --mem "$size" --work "$work/w" --out "$work/streamed" --quiet \
  --checkpoint-every 0 "$@" >/dev/null &
pid=$!
# The pair in progress (as its materials, e.g. [[3,3]]) and its last
# recorded step, from the checkpoint.
recorded() {
  local line
  line=$(sed -n 's/.*"pair":{"materials":\(\[\[[0-9,]*\]\(,\[[0-9,]*\]\)*\]\),"depth_plies":\([0-9]*\).*/\1 \3/p' \
    "$work/w/checkpoint.json" 2>/dev/null)
  echo "${line:-- 0}"
}
while kill -0 "$pid" 2>/dev/null; do
  read -r pair at <<<"$(recorded)"
  if [ "$pair" = "$last" ] && [ "$at" -ge "$depth" ]; then
    kill -9 "$pid"
    break
  fi
  sleep 0.2
done
wait "$pid" 2>/dev/null || true
[ ! -e "$work/streamed" ] || { echo "the run finished before it was killed; use a smaller DEPTH" >&2; exit 1; }
read -r pair at <<<"$(recorded)"
echo "killed inside $pair after the checkpoint of depth $at; resuming"
"$bin" generate --men "$men" --mem "$size" --work "$work/w" --out "$work/streamed" --resume "$@" 2>&1 |
  grep -E 'resumed|^summary'
count=$(same_shards "$work/memory" "$work/streamed")
echo "identical: $count shards of the $men-men table, in memory and streamed, killed and resumed"

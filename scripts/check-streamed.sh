#!/usr/bin/env bash
# Checks that a table generated streamed under a small budget is bit for bit
# the table generated in memory: generates both (release build) and compares
# every shard with cmp. Too slow for `cargo test` at 6 men (minutes), so it
# lives here; tests/streamed.rs does the same at 4 men.
#
# usage: scripts/check-streamed.sh [MEN] [SIZE] [extra generate args...]
#   scripts/check-streamed.sh 6 32MiB
#   scripts/check-streamed.sh 6 32MiB --io pread --no-move loss
set -euo pipefail
men=${1:-6}
size=${2:-32MiB}
shift $(( $# > 2 ? 2 : $# )) || true
cd "$(dirname "$0")/.."
source scripts/check-common.sh
build_and_scratch
"$bin" generate --men "$men" --out "$work/memory" --quiet "$@" >/dev/null
"$bin" generate --men "$men" --mem "$size" --work "$work/w" --out "$work/streamed" --quiet "$@" | grep '^summary'
count=$(same_shards "$work/memory" "$work/streamed")
echo "identical: $count shards of the $men-men table, in memory and streamed under $size"

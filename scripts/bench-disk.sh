#!/usr/bin/env bash
# Benchmark: the disk's own sequential O_DIRECT bandwidth (dd, 4 MiB blocks)
# and ours through onitb::blockio (tools/disk_bandwidth.rs: io_uring at
# queue depth 1 and 8, pread), in MB/s (10^6 bytes/s). Writes include the
# final fdatasync. Runs RUNS times and prints each run and the median.
#
# usage: scripts/bench-disk.sh [DIR] [SIZE_MIB] [RUNS]
#   DIR       where the test file goes (default: a temporary directory inside
#             the project, i.e. on the project disk); must accept O_DIRECT
#   SIZE_MIB  file size (default 2048)
#   RUNS      default 3
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
root=$(pwd)
dir=${1:-$root}
size_mib=${2:-2048}
runs=${3:-3}
(( size_mib >= 4 && size_mib % 4 == 0 )) || { echo "SIZE_MIB must be a multiple of 4" >&2; exit 2; }
cargo build --release --quiet --example disk_bandwidth
bin=${CARGO_TARGET_DIR:-target}/release/examples/disk_bandwidth
work=$(mktemp -d "$dir/.onitb-bench-disk.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "dir: $work ($(df --output=source,fstype "$work" | tail -1)), size: $size_mib MiB, runs: $runs"

# MB/s from dd's summary line: "N bytes (...) copied, S s, ...".
dd_mbps() { awk -F', ' '/copied/ { split($1, b, " "); split($(NF-1), s, " "); printf "%.0f", b[1] / s[1] / 1e6 }'; }

printf 'run\tdd_write\tdd_read\turing_qd1_write\turing_qd1_read\turing_qd8_write\turing_qd8_read\tpread_write\tpread_read\n'
for run in $(seq 1 "$runs"); do
  dd_write=$(dd if=/dev/zero of="$work/dd" bs=4M count=$((size_mib / 4)) oflag=direct conv=fdatasync 2>&1 | dd_mbps)
  dd_read=$(dd if="$work/dd" of=/dev/null bs=4M iflag=direct 2>&1 | dd_mbps)
  rm -f "$work/dd"
  # Rows: backend, depth, write, read -> one line of write/read pairs.
  ours=$("$bin" "$work" "$size_mib" | awk 'NR > 1 { printf "\t%s\t%s", $3, $4 }')
  printf '%s\t%s\t%s%s\n' "$run" "$dd_write" "$dd_read" "$ours" | tee -a "$work/rows"
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf 'median'
for column in $(seq 2 9); do printf '\t%s' "$(cut -f"$column" "$work/rows" | median)"; done
printf '\n'

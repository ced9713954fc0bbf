#!/usr/bin/env bash
# Benchmark finished tables: compression (full values and WDL only), checksum
# verification, probe latency. Every figure is per run; the last line of each
# section is the median over RUNS runs. Times come from /usr/bin/time -v
# over the whole process (wall, user + sys, peak RSS).
#
# usage: [KINDS="values wdl"] scripts/bench-finished.sh TABLE_DIR [RUNS] [LEVEL] [PROBES]
#   cargo run --release -- generate --men 6 --out /tmp/t6
#   scripts/bench-finished.sh /tmp/t6 3 19 2000
# TABLE_DIR is a table of values, raw or compressed (`onitb generate`, with
# or without --compress). KINDS picks the compressions measured (values:
# WDL and depth; wdl: `--wdl`); the verification and probe sections need
# "values" among them. The compressed copies go to a temporary directory
# (under TMPDIR), removed at the end. MB/s in counts value bytes (one per
# state and game-over hole), whatever the input's format.
set -euo pipefail
table=${1:?usage: scripts/bench-finished.sh TABLE_DIR [RUNS] [LEVEL] [PROBES]}
runs=${2:-3}
kinds=${KINDS:-values wdl}
level=${3:-19}
probes=${4:-2000}
table=$(realpath "$table")
cd "$(dirname "$0")/.."
cargo build --release --quiet --bin onitb --example probe_latency
target=${CARGO_TARGET_DIR:-target}
bin=$target/release/onitb
probe=$target/release/examples/probe_latency
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
wall_s() { awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$1" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }'; }
cpu_s() { awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {print u + s}' "$1"; }
rss_kib() { awk -F': ' '/Maximum resident/ {print $2}' "$1"; }
# Bytes of the shard files of a directory (the directory entry not counted).
dir_bytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {print s}'; }

in_bytes=$(dir_bytes "$table")
echo "table $table: $in_bytes bytes; zstd level $level; $runs runs"

for kind in $kinds; do
  flag=""
  [ "$kind" = wdl ] && flag="--wdl"
  printf '\n== compress (%s)\nrun\twall_s\tcpu_s\tmax_rss_kib\tout_bytes\tbits_per_state\tmb_s_in\tmb_s_out\n' "$kind"
  : >"$work/rows"
  for run in $(seq 1 "$runs"); do
    rm -rf "$work/$kind"
    /usr/bin/time -v "$bin" compress "$table" "$work/$kind" --level "$level" $flag --quiet >"$work/out" 2>"$work/time"
    wall=$(wall_s "$work/time")
    out_bytes=$(dir_bytes "$work/$kind")
    bits=$(sed -n 's/^total: .* \([0-9.]*\) bits\/state.*/\1/p' "$work/out")
    value_bytes=$(sed -n 's/^total: [0-9]* states, \([0-9]*\) value bytes.*/\1/p' "$work/out")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$wall" "$(cpu_s "$work/time")" "$(rss_kib "$work/time")" "$out_bytes" "$bits" \
      "$(awk -v b="$value_bytes" -v t="$wall" 'BEGIN {printf "%.1f", b / 1e6 / t}')" \
      "$(awk -v b="$out_bytes" -v t="$wall" 'BEGIN {printf "%.2f", b / 1e6 / t}')" | tee -a "$work/rows"
  done
  printf 'median'
  for col in 2 3 4 5 6 7 8; do printf '\t%s' "$(cut -f$col "$work/rows" | median)"; done
  printf '\n'
done

[ -d "$work/values" ] || exit 0
printf '\n== verify (checksums)\nrun\tinput_wall_s\tinput_mb_s\tcompressed_wall_s\tcompressed_mb_s\n'
: >"$work/rows"
z_bytes=$(dir_bytes "$work/values")
for run in $(seq 1 "$runs"); do
  /usr/bin/time -v "$bin" verify "$table" >/dev/null 2>"$work/time"
  in_wall=$(wall_s "$work/time")
  /usr/bin/time -v "$bin" verify "$work/values" >/dev/null 2>"$work/time"
  z_wall=$(wall_s "$work/time")
  printf '%s\t%s\t%s\t%s\t%s\n' "$run" "$in_wall" "$(awk -v b="$in_bytes" -v t="$in_wall" 'BEGIN {if (t > 0) printf "%.0f", b / 1e6 / t; else print "n/a"}')" \
    "$z_wall" "$(awk -v b="$z_bytes" -v t="$z_wall" 'BEGIN {if (t > 0) printf "%.0f", b / 1e6 / t; else print "n/a"}')" | tee -a "$work/rows"
done
printf 'median'
for col in 2 3 4 5; do printf '\t%s' "$(cut -f$col "$work/rows" | median)"; done
printf '\n'

for kind in input compressed; do
  dir=$table
  [ "$kind" = compressed ] && dir=$work/values
  printf '\n== probe latency (%s, %s random positions)\nrun\topen_ms\tcold_median_us\tcold_p99_us\tcold_read_median_us\tcold_read_p99_us\twarm_median_us\twarm_p99_us\tread_all_blocks_mb_s\n' "$kind" "$probes"
  : >"$work/rows"
  for run in $(seq 1 "$runs"); do
    "$probe" "$dir" "$probes" >"$work/out"
    printf '%s' "$run" >>"$work/rows"
    for key in open_ms cold_median_us cold_p99_us cold_read_median_us cold_read_p99_us warm_median_us warm_p99_us read_all_blocks_mb_per_s; do
      printf '\t%s' "$(awk -v k="$key" '$1 == k {print $2}' "$work/out")" >>"$work/rows"
    done
    printf '\n' >>"$work/rows"
    tail -n 1 "$work/rows"
  done
  printf 'median'
  for col in 2 3 4 5 6 7 8 9; do printf '\t%s' "$(cut -f$col "$work/rows" | median)"; done
  printf '\n'
done

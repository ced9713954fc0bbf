#!/usr/bin/env bash
# Benchmark: generate a table in release mode several times and report the
# median CPU time (user + sys), wall time, peak RSS and file-system I/O, each
# measured by /usr/bin/time -v over the whole process.
#
# usage: scripts/bench-generate.sh [MEN] [RUNS] [extra generate args...]
#   scripts/bench-generate.sh 6 3
#   scripts/bench-generate.sh 6 3 --threads 1
#   scripts/bench-generate.sh 6 1 --mem 32MiB      (streamed, work dir on disk)
set -euo pipefail
men=${1:-6}
runs=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/onitb
# Scratch space on the project disk (not a tmpfs: O_DIRECT and real I/O).
work=$(mktemp -d -p "$PWD/target")
trap 'rm -rf "$work"' EXIT
printf 'run\tuser_s\tsys_s\tcpu_s\twall_s\tmax_rss_kib\tfs_in_blocks\tfs_out_blocks\n'
for run in $(seq 1 "$runs"); do
  rm -rf "$work/table"
  rm -rf "$work/w"
  # With --mem, the work directory goes inside the scratch directory.
  work_args=()
  if [[ " $* " == *" --mem "* ]]; then work_args=(--work "$work/w"); fi
  /usr/bin/time -v "$bin" generate --men "$men" --out "$work/table" "${work_args[@]}" --quiet "$@" >"$work/stdout" 2>"$work/time"
  grep '^summary' "$work/stdout" >&2 || true
  user=$(awk -F': ' '/User time/ {print $2}' "$work/time")
  sys=$(awk -F': ' '/System time/ {print $2}' "$work/time")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/time" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$work/time")
  fin=$(awk -F': ' '/File system inputs/ {print $2}' "$work/time")
  fout=$(awk -F': ' '/File system outputs/ {print $2}' "$work/time")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$user" "$sys" "$cpu" "$wall" "$rss" "$fin" "$fout" | tee -a "$work/rows"
done
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf 'median\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
  "$(cut -f2 "$work/rows" | median)" "$(cut -f3 "$work/rows" | median)" "$(cut -f4 "$work/rows" | median)" \
  "$(cut -f5 "$work/rows" | median)" "$(cut -f6 "$work/rows" | median)" "$(cut -f7 "$work/rows" | median)" \
  "$(cut -f8 "$work/rows" | median)"
echo "table statistics of the last run:"
cat "$work/stdout"

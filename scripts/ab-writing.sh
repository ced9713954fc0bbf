#!/usr/bin/env bash
# A/B of the last phase of `onitb generate`: writing the table. Builds
# revision BASE and the working tree in release mode (scripts/ab-build.sh),
# then runs each in turn for ROUNDS rounds under /usr/bin/time, and reports
# per run the CPU time (user, sys) and wall time from the progress line
# "writing ..." to the end of the process: the process's own times at that
# line (/proc/PID/stat, polled every 20 ms, so up to 20 ms late) subtracted
# from /usr/bin/time's totals. The whole-run CPU A/B (scripts/ab-generate.sh)
# swings +-10% per run, more than the whole writing phase costs.
#
# usage: scripts/ab-writing.sh BASE [ROUNDS] [MEN] [extra generate args...]
#   scripts/ab-writing.sh HEAD 3 6
set -euo pipefail
base_rev=${1:?usage: scripts/ab-writing.sh BASE [ROUNDS] [MEN] [extra generate args...]}
rounds=${2:-3}
men=${3:-6}
shift $(( $# > 3 ? 3 : $# )) || true
cd "$(dirname "$0")/.."
scratch=$(mktemp -d -p "$PWD/target")
trap 'rm -rf "$scratch"' EXIT
scripts/ab-build.sh "$base_rev" "$scratch"
ticks=$(getconf CLK_TCK)
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf 'round\tbinary\twriting_user_s\twriting_sys_s\twriting_cpu_s\twriting_wall_s\trun_cpu_s\n'
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    rm -rf "$scratch/table"
    log="$scratch/progress" time_out="$scratch/time"
    : >"$log"
    # Progress lines go to stderr; the table's statistics to stdout.
    /usr/bin/time -v -o "$time_out" "$scratch/onitb.$which" generate --men "$men" --out "$scratch/table" "$@" \
      >/dev/null 2>"$log" &
    time_pid=$!
    # The onitb process is /usr/bin/time's child.
    pid=""
    while [ -z "$pid" ] && kill -0 "$time_pid" 2>/dev/null; do pid=$(pgrep -P "$time_pid" || true); sleep 0.02; done
    at=""
    while kill -0 "$pid" 2>/dev/null; do
      if grep -q '] writing ' "$log"; then
        at=$(awk '{print $14, $15}' "/proc/$pid/stat" 2>/dev/null || true)
        at_wall=$(date +%s.%N)
        break
      fi
      sleep 0.02
    done
    wait "$time_pid"
    end_wall=$(date +%s.%N)
    if [ -z "$at" ]; then
      echo "ab-writing: the $which run ended before its 'writing' line" >&2
      exit 1
    fi
    user=$(awk -F': ' '/User time/ {print $2}' "$time_out")
    sys=$(awk -F': ' '/System time/ {print $2}' "$time_out")
    read -r at_user at_sys <<<"$at"
    awk -v u="$user" -v s="$sys" -v au="$at_user" -v as="$at_sys" -v t="$ticks" -v w0="$at_wall" -v w1="$end_wall" \
      -v r="$round" -v b="$which" 'BEGIN {
        wu = u - au / t; ws = s - as / t
        printf "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", r, b, wu, ws, wu + ws, w1 - w0, u + s }' | tee -a "$scratch/rows"
  done
done
for which in base this; do
  printf 'median\t%s\t%s\t%s\t%s\t%s\t%s\n' "$which" \
    "$(awk -v b="$which" '$2 == b {print $3}' "$scratch/rows" | median)" \
    "$(awk -v b="$which" '$2 == b {print $4}' "$scratch/rows" | median)" \
    "$(awk -v b="$which" '$2 == b {print $5}' "$scratch/rows" | median)" \
    "$(awk -v b="$which" '$2 == b {print $6}' "$scratch/rows" | median)" \
    "$(awk -v b="$which" '$2 == b {print $7}' "$scratch/rows" | median)"
done

#!/usr/bin/env bash
# A/B of one phase of `onitb generate`: by default the last, writing the
# table. Builds revision BASE and the working tree in release mode
# (scripts/ab-build.sh), then runs each in turn (base first in odd rounds,
# this first in even ones) for ROUNDS rounds under
# /usr/bin/time, and reports per run the CPU time (user, sys) and wall time
# from the first progress line matching FROM (default "] writing ") to the
# next line after it matching TO (a grep -E pattern; default: none, the end
# of the process). The times at a line are the process's own
# (/proc/PID/stat, polled every 20 ms, so up to 20 ms late); at the end,
# /usr/bin/time's totals. The whole-run CPU A/B (scripts/ab-generate.sh)
# swings +-10% per run, more than a phase of a few percent costs.
#
# usage: [FROM=pattern] [TO=pattern] scripts/ab-phase.sh BASE [ROUNDS] [MEN] [extra generate args...]
#   scripts/ab-phase.sh HEAD 3 6                       (writing the table)
#   FROM='3v3: started' TO='initialised' scripts/ab-phase.sh HEAD 5 6
set -euo pipefail
base_rev=${1:?usage: [FROM=pattern] [TO=pattern] scripts/ab-phase.sh BASE [ROUNDS] [MEN] [extra generate args...]}
from=${FROM:-'] writing '}
to=${TO:-}
rounds=${2:-3}
men=${3:-6}
shift $(( $# > 3 ? 3 : $# )) || true
cd "$(dirname "$0")/.."
# For ab_order only: this script keeps its own scratch directory and rows.
source scripts/ab-common.sh
scratch=$(mktemp -d -p "$PWD/target")
trap 'rm -rf "$scratch"' EXIT
scripts/ab-build.sh "$base_rev" "$scratch"
ticks=$(getconf CLK_TCK)
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf 'round\tbinary\tphase_user_s\tphase_sys_s\tphase_cpu_s\tphase_wall_s\trun_cpu_s\n'
# The process's user and system seconds now.
times_of() { awk -v t="$ticks" '{print $14 / t, $15 / t}' "/proc/$1/stat" 2>/dev/null || true; }
for round in $(seq 1 "$rounds"); do
  for which in $(ab_order "$round"); do
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
    # The phase's start: the first line matching FROM.
    at="" from_line=""
    while kill -0 "$pid" 2>/dev/null; do
      from_line=$(grep -n -m1 -e "$from" "$log" | cut -d: -f1 || true)
      if [ -n "$from_line" ]; then
        at=$(times_of "$pid")
        at_wall=$(date +%s.%N)
        break
      fi
      sleep 0.02
    done
    # Its end: the next line after it matching TO, or the process's end.
    until_=""
    while [ -n "$to" ] && kill -0 "$pid" 2>/dev/null; do
      if tail -n +"$((from_line + 1))" "$log" | grep -q -E -e "$to"; then
        until_=$(times_of "$pid")
        end_wall=$(date +%s.%N)
        break
      fi
      sleep 0.02
    done
    wait "$time_pid"
    if [ -z "$at" ] || { [ -n "$to" ] && [ -z "$until_" ]; }; then
      echo "ab-phase: the $which run ended before the phase's lines ('$from' to '${to:-the end}')" >&2
      exit 1
    fi
    if [ -z "$to" ]; then
      end_wall=$(date +%s.%N)
      user=$(awk -F': ' '/User time/ {print $2}' "$time_out")
      sys=$(awk -F': ' '/System time/ {print $2}' "$time_out")
      until_="$user $sys"
    fi
    user=$(awk -F': ' '/User time/ {print $2}' "$time_out")
    sys=$(awk -F': ' '/System time/ {print $2}' "$time_out")
    read -r at_user at_sys <<<"$at"
    read -r end_user end_sys <<<"$until_"
    awk -v u="$end_user" -v s="$end_sys" -v au="$at_user" -v as="$at_sys" -v w0="$at_wall" -v w1="$end_wall" \
      -v ru="$user" -v rs="$sys" -v r="$round" -v b="$which" 'BEGIN {
        wu = u - au; ws = s - as
        printf "%s\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\n", r, b, wu, ws, wu + ws, w1 - w0, ru + rs }' | tee -a "$scratch/rows"
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

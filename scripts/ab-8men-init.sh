#!/usr/bin/env bash
# A/B benchmark of 4v4's initialisation at 8 men (folding the captures
# into 3v4, the first decisions, the capture schedule): builds revision
# BASE and the working tree in release mode, runs `onitb generate --men 8
# --mem 1GiB --no-move loss --compress 3` (as scripts/bench-8men.sh) with
# the working tree's binary until 4v4 starts (about 7 minutes; the work
# directory, about 2 GB, is kept in WORKDIR/at-4v4 and reused by later
# calls), then per round resumes a copy of it with each binary in turn
# and stops it (-9) once 4v4 is initialised. Reports per run the
# initialisation's wall time (its progress line's time, counted from the
# resume), the run's CPU time (user + sys, /usr/bin/time: the resume's
# few seconds of opening included) and the captured values it read
# packed; then the medians.
#
# With UNTIL=D, each run goes on through 4v4's steps to depth D (its
# `--verbose` line) before it is stopped, and the report adds the steps'
# wall time (from the initialisation's line to depth D's) and the sums of
# their lines' computing / settling / waiting for I/O. The run takes the
# bench's checkpoints (every 60 s) like a whole run.
#
# Both binaries must read the same checkpoint version.
#
# usage: scripts/ab-8men-init.sh BASE [ROUNDS] [WORKDIR]
#   scripts/ab-8men-init.sh HEAD~1 3 /work/scratch/abi
#   UNTIL=7 scripts/ab-8men-init.sh HEAD~1 2 /work/scratch/abi
# WORKDIR needs about 40 GB free while the kit is made (default: a
# directory under target/), 2 GB a run after; with UNTIL, about 30 GB a
# run by depth 4 (each run's copy is removed when it ends, or fails).
set -euo pipefail
base_rev=${1:?usage: scripts/ab-8men-init.sh BASE [ROUNDS] [WORKDIR]}
rounds=${2:-3}
cd "$(dirname "$0")/.."
root=$PWD
scratch=${3:-$root/target/ab-8men-init}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
scripts/ab-build.sh "$base_rev" "$scratch"
args=(generate --men 8 --mem 1GiB --no-move loss --compress 3)
ready="$scratch/at-4v4"
if [ ! -f "$ready/checkpoint.json" ] || ! grep -q '\[4,3\]\]' "$ready/checkpoint.json"; then
  rm -rf "$ready" "$scratch/t8"
  scripts/run-until-4v4.sh "$scratch/at-4v4.log" "$scratch/onitb.this" "${args[@]}" --work "$ready" --out "$scratch/t8"
  grep -q '\[4,3\]\]' "$ready/checkpoint.json" || { echo "no checkpoint with 3v4+4v3 finished" >&2; exit 1; }
fi
seconds() { sed -E 's/^\[ *//; s/s\].*//' | awk -Fm '{ if (NF == 2) print $1 * 60 + $2; else print $1 }'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
results="$scratch/results"
: > "$results"
until=${UNTIL:-}
# The line that ends a run: initialisation's, or depth UNTIL's step line
# (not its batch lines, "depth D plies: ...").
if [ -n "$until" ]; then stop="depth $until plies, [0-9]+ states"; else stop="initialised"; fi
printf 'round\tbinary\tinit_wall_s\tcpu_s\tpacked_read%b\n' "${until:+\tsteps_wall_s\tcomputing_s\tsettling_s\twaiting_s}"
# A failed run's copy goes too (a few of them fill the disk), after its
# last progress lines are shown.
gone() { tr '\r' '\n' < "$dir/progress.log" | tail -3 >&2; rm -rf "$dir"; }
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    dir="$scratch/$which.$round"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$ready" "$dir/work"
    rm -f "$dir/work/lock"
    # Made here, not by the redirection below, so that the first look for
    # the line finds it.
    : > "$dir/progress.log"
    /usr/bin/time -v -o "$dir/time.txt" "$scratch/onitb.$which" "${args[@]}" --work "$dir/work" --out "$dir/t8" \
      --resume --verbose 2> "$dir/progress.log" > /dev/null &
    pid=$!
    while kill -0 "$pid" 2> /dev/null; do
      if tr '\r' '\n' < "$dir/progress.log" | grep -Eq "$stop"; then
        pkill -9 -P "$pid" || true
        break
      fi
      sleep 0.3
    done
    wait "$pid" 2> /dev/null || true
    line=$(tr '\r' '\n' < "$dir/progress.log" | grep -m1 "initialised" || true)
    [ -n "$line" ] || { gone; echo "run $which.$round ended before 4v4 was initialised" >&2; exit 1; }
    wall=$(echo "$line" | seconds)
    read_packed=$(echo "$line" | sed -E 's/.*read ([0-9.]+ [KMG]iB).*/\1/')
    cpu=$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.2f", u + s}' "$dir/time.txt")
    steps=""
    if [ -n "$until" ]; then
      last=$(tr '\r' '\n' < "$dir/progress.log" | grep -Em1 "$stop" || true)
      [ -n "$last" ] || { gone; echo "run $which.$round ended before 4v4's depth $until" >&2; exit 1; }
      steps=$(tr '\r' '\n' < "$dir/progress.log" | sed -En "1,/$stop/p" | grep -E "plies, [0-9]+ states.*computing" | sed -E \
        's/.*computing ([0-9.]+)s[^,]*, settling ([0-9.]+)s[^,]*, waiting for I\/O ([0-9.]+)s.*/\1 \2 \3/' |
        awk -v w="$(echo "$last" | seconds)" -v i="$wall" \
          '{c += $1; s += $2; t += $3} END {printf "\t%d\t%.1f\t%.1f\t%.1f", w - i, c, s, t}')
    fi
    printf '%s\t%s\t%s\t%s\t%s%s\n' "$round" "$which" "$wall" "$cpu" "$read_packed" "$steps" | tee -a "$results"
    rm -rf "$dir"
  done
done
for which in base this; do
  printf 'median\t%s\t%s\t%s%b\n' "$which" \
    "$(awk -F'\t' -v w="$which" '$2 == w {print $3}' "$results" | median)" \
    "$(awk -F'\t' -v w="$which" '$2 == w {print $4}' "$results" | median)" \
    "${until:+\t\t$(awk -F'\t' -v w="$which" '$2 == w {print $6}' "$results" | median)}"
done

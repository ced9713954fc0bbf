#!/usr/bin/env bash
# A/B benchmark of finishing a streamed pair at 8 men (applying the decision
# logs and packing the values): 3v4+4v3 (11.2e9 value bytes, the default)
# or 4v4 (36.3e9). Builds revision BASE and the working tree in release
# mode, runs `onitb generate --men 8 --mem 1GiB --no-move loss --compress 3`
# (as scripts/bench-8men.sh) with the working tree's binary until the
# checkpoint records the pair's steps as over (about 10 minutes for
# 3v4+4v3, 16 for 4v4; kept in WORKDIR/steps-over[-4v4] and reused by later
# calls), then per round resumes a copy of that work directory with each
# binary in turn and stops it when the pair is finished: for 3v4+4v3 when
# 4v4 starts, for 4v4 when its steps' closing line is printed. Reports the
# wall time from the resume to there (the finishing, and opening the run)
# and the CPU time the resumed process had used by then.
#
# 4v4's kit (29 GB) is copied as hard links, not bytes: a resumed
# finishing writes new files (its packed values, the checkpoint, shards)
# and only punches out files it does not read (`capture`, `held`, the
# capture schedule), so the kit stays as it was. 3v4+4v3's (12 GB) is
# copied whole. The shards the kit's run had written are kept, so the
# resumed runs do not write them again beside the finishing.
#
# Both binaries must read the same checkpoint version.
#
# usage: scripts/ab-8men-finish.sh BASE [ROUNDS] [WORKDIR] [3v4|4v4]
#   scripts/ab-8men-finish.sh 16122bd 3 /work/scratch/abf
#   scripts/ab-8men-finish.sh 16122bd 3 /work/scratch/abf 4v4
# WORKDIR needs about 30 GB free for 3v4+4v3, 45 GB for 4v4 (default: a
# directory under target/).
set -euo pipefail
usage="usage: scripts/ab-8men-finish.sh BASE [ROUNDS] [WORKDIR] [3v4|4v4]"
base_rev=${1:?$usage}
rounds=${2:-1}
pair=${4:-3v4}
cd "$(dirname "$0")/.."
root=$PWD
scratch=${3:-$root/target/ab-8men-finish}
case "$pair" in
  # The record that names the pair's steps as over; the pair is not
  # finished yet (it is in "pair", not in "finished").
  3v4) ready_pair='"materials":\[\[3,4\]'; ready_name=steps-over; stop="4v4: started"; copy=(cp -r) ;;
  4v4) ready_pair='"materials":\[\[4,4\]'; ready_name=steps-over-4v4; stop="4v4: done after"; copy=(cp -al) ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
scripts/ab-build.sh "$base_rev" "$scratch"
args=(generate --men 8 --mem 1GiB --no-move loss --compress 3)
ready="$scratch/$ready_name"
if [ ! -f "$ready/work/checkpoint.json" ] || ! grep -q '"steps_done":true' "$ready/work/checkpoint.json"; then
  rm -rf "$ready"
  mkdir -p "$ready"
  "$scratch/onitb.this" "${args[@]}" --work "$ready/work" --out "$ready/t8" 2> "$ready/steps-over.log" > /dev/null &
  pid=$!
  while kill -0 "$pid" 2> /dev/null; do
    if grep -q '"steps_done":true' "$ready/work/checkpoint.json" 2> /dev/null \
      && grep -q "$ready_pair" "$ready/work/checkpoint.json"; then
      kill -9 "$pid"
      break
    fi
    sleep 0.3
  done
  wait "$pid" 2> /dev/null || true
  grep -q '"steps_done":true' "$ready/work/checkpoint.json" || { echo "no checkpoint with $pair's steps over" >&2; exit 1; }
fi
ticks=$(getconf CLK_TCK)
for round in $(seq 1 "$rounds"); do
  for which in base this; do
    dir="$scratch/$which.$round"
    rm -rf "$dir"
    mkdir -p "$dir"
    "${copy[@]}" "$ready/work" "$dir/work"
    # The output directory the kit's run was writing (its finished shards).
    for partial in "$ready"/.t8.partial-*; do
      if [ -e "$partial" ]; then "${copy[@]}" "$partial" "$dir/"; fi
    done
    # Made here, not by the redirection below, so that the first look for
    # the line finds it.
    : > "$dir/progress.log"
    start=$(date +%s.%N)
    "$scratch/onitb.$which" "${args[@]}" --work "$dir/work" --out "$dir/t8" --resume 2> "$dir/progress.log" > /dev/null &
    pid=$!
    cpu=unknown
    while kill -0 "$pid" 2> /dev/null; do
      if tr '\r' '\n' < "$dir/progress.log" | grep -q -e "$stop"; then
        # User and system time in clock ticks: fields 12 and 13 once the
        # pid and the command are cut off /proc/PID/stat.
        cpu=$(sed 's/.*) //' "/proc/$pid/stat" | awk -v hz="$ticks" '{ printf "%.1f", ($12 + $13) / hz }')
        kill -9 "$pid"
        break
      fi
      sleep 0.2
    done
    wait "$pid" 2> /dev/null || true
    end=$(date +%s.%N)
    echo "== round $round, $which: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s from the resume to \"$stop\", CPU $cpu s"
    rm -rf "$dir"
  done
done

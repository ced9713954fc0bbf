#!/usr/bin/env bash
# A/B benchmark of 4v4's streamed steps at 8 men, in place: one work
# directory is stepped on by the two binaries in turn, so each arm's steps
# see the same tables as the other's neighbouring steps, and no copy of a
# 30-40 GB checkpoint is needed.
#
# Builds revision BASE and the working tree in release mode; runs
# `onitb generate --men 8 --mem 1GiB --no-move loss --compress 3` (as
# scripts/bench-8men.sh) with the base binary until the checkpoint holds
# 4v4 at depth FROM (about 25 minutes to depth 30; the work directory is
# kept in WORKDIR/work and reused by a later call that starts at its
# depth); then resumes it `--checkpoint-every 0 --verbose`, STEPS steps at
# a time, with the binaries in the order base this this base base this ...
# up to depth TO, each run killed (-9) once the checkpoint holds its last
# depth. A resumed run sets every change flag, in both arms alike. With
# CHECKPOINT_EVERY=N the turns take a checkpoint every N seconds, as a
# whole run does (default 0, every step); a turn may then go a step past
# its last depth, and the next starts from its checkpoint.
#
# Reports, per 16 depths, in all, and in all but the first step of each
# turn (a new process's, which waits longer), the sums of each arm's
# `--verbose` step lines: computing / settling / waiting for I/O = wall,
# and the storing and reading thread's busy time; then each arm's whole turns
# (resuming, steps and their checkpoints) and what of them falls outside
# the step lines. The logs stay in WORKDIR/late.
#
# usage: scripts/ab-8men-late.sh BASE FROM TO [WORKDIR] [STEPS]
#   scripts/ab-8men-late.sh 85014e5 30 93 /work/scratch/ab
# WORKDIR needs about 40 GB free, 75 GB with KEEP=1 (default: a directory
# under target/).
set -euo pipefail
usage="usage: scripts/ab-8men-late.sh BASE FROM TO [WORKDIR] [STEPS]"
base_rev=${1:?$usage}
from=${2:?$usage}
to=${3:?$usage}
steps=${5:-2}
# Seconds between checkpoints in the turns (0: every step, so that each
# turn ends where it should).
every=${CHECKPOINT_EVERY:-0}
cd "$(dirname "$0")/.."
root=$PWD
scratch=${4:-$root/target/ab-8men-late}
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
scripts/ab-build.sh "$base_rev" "$scratch"
work="$scratch/work"
args=(generate --men 8 --mem 1GiB --no-move loss --compress 3 --work "$work" --out "$scratch/t8")

# 4v4's depth in the checkpoint, or -1 before 4v4 has one.
depth_4v4() {
  local json="$work/checkpoint.json"
  if grep -q '"materials":\[\[4,4\]' "$json" 2> /dev/null; then
    grep -o '"depth_plies":[0-9]*' "$json" | head -1 | cut -d: -f2
  else
    echo -1
  fi
}

# run_until DEPTH LOG BINARY ARGS...: runs the binary until the checkpoint
# holds 4v4 at DEPTH or more, then kills it as a crash would.
run_until() {
  local depth=$1 log=$2
  shift 2
  "$@" 2> "$log" > /dev/null &
  local pid=$!
  while kill -0 "$pid" 2> /dev/null; do
    if [ "$(depth_4v4)" -ge "$depth" ]; then
      kill -9 "$pid"
      break
    fi
    sleep 0.1
  done
  wait "$pid" 2> /dev/null || true
}

# With KEEP=1, a copy of the work directory at depth FROM is kept in
# WORKDIR/work.FROM (about 35 GB more at FROM = 30) and every call starts
# from it, so that one preparation serves several comparisons.
kept="$scratch/work.$from"
if [ "${KEEP:-0}" = 1 ] && [ -d "$kept" ]; then
  rm -rf "$work"
  cp -a --sparse=always "$kept" "$work"
  # Else the copy's writeback competes with the first turns' reads.
  sync
fi
now=$(depth_4v4)
if [ "$now" -ne "$from" ]; then
  if [ "$now" -gt "$from" ]; then
    echo "starting $work afresh (its checkpoint is at 4v4 depth $now, not $from)"
    rm -rf "$work"
  fi
  resume=()
  [ -f "$work/checkpoint.json" ] && resume=(--resume)
  run_until "$from" "$scratch/prepare.log" "$scratch/onitb.base" "${args[@]}" --checkpoint-every 0 "${resume[@]}"
  now=$(depth_4v4)
  if [ "$now" -ne "$from" ]; then
    echo "the checkpoint is at 4v4 depth $now, not $from; see $scratch/prepare.log" >&2
    exit 1
  fi
fi
if [ "${KEEP:-0}" = 1 ] && [ ! -d "$kept" ]; then
  cp -a --sparse=always "$work" "$kept.part"
  mv "$kept.part" "$kept"
  sync
fi

logs="$scratch/late"
rm -rf "$logs"
mkdir -p "$logs"
order=(base this this base)
turn=0
while [ "$now" -lt "$to" ]; do
  which=${order[turn % 4]}
  until=$((now + steps > to ? to : now + steps))
  started=$(date +%s.%N)
  run_until "$until" "$logs/$turn.$which.log" "$scratch/onitb.$which" "${args[@]}" \
    --checkpoint-every "$every" --verbose --resume
  awk -v arm="$which" -v t0="$started" -v t1="$(date +%s.%N)" 'BEGIN { print arm, t1 - t0 }' >> "$logs/turns.txt"
  # Only the steps this turn was for: a run may finish one more before it
  # is killed, and the next turn does that one again.
  # The first step of a turn is marked: it is a new process's first step,
  # which waits longer than a step of a whole run does (see the summary).
  tr '\r' '\n' < "$logs/$turn.$which.log" | awk -v lo="$now" -v hi="$until" -v arm="$which" '
    / depth [0-9]+ plies, .*computing / {
      for (i = 1; i <= NF; i++) if ($i == "depth") d = $(i + 1)
      if (d > lo && d <= hi) print arm, d, (n++ == 0 ? "first" : "later"), $0
    }' >> "$logs/steps.txt"
  after=$(depth_4v4)
  if [ "$after" -le "$now" ]; then
    echo "turn $turn ($which) made no progress from depth $now; see $logs/$turn.$which.log" >&2
    exit 1
  fi
  now=$after
  turn=$((turn + 1))
done

# Sums per arm and per 16 depths.
awk -v from="$from" '
  function secs(t,   m, h) {
    sub(/[,;)]*$/, "", t)
    if (t ~ /h/) { split(t, h, /h|m|s/); return h[1] * 3600 + h[2] * 60 + h[3] }
    if (t ~ /m/) { split(t, m, /m|s/); return m[1] * 60 + m[2] }
    sub(/s$/, "", t); return t + 0
  }
  FILENAME ~ /turns/ { TW[$1] += $2; TN[$1]++; next }
  {
    arm = $1; d = $2
    for (i = 3; i <= NF; i++) {
      if ($i == "computing") c = secs($(i + 1))
      if ($i == "settling") s = secs($(i + 1))
      if ($i == "I/O") w = secs($(i + 1))
      if ($i == "busy") b = secs($(i + 1))
    }
    r = int((d - from - 1) / 16)
    lo[r] = from + 1 + 16 * r
    hi[r] = (d > hi[r] ? d : hi[r])
    C[arm, r] += c; S[arm, r] += s; W[arm, r] += w; B[arm, r] += b; N[arm, r]++
    C[arm, "all"] += c; S[arm, "all"] += s; W[arm, "all"] += w; B[arm, "all"] += b; N[arm, "all"]++
    if ($3 == "later") {
      C[arm, "later"] += c; S[arm, "later"] += s; W[arm, "later"] += w; B[arm, "later"] += b; N[arm, "later"]++
    }
    if (r > last) last = r
  }
  function row(name, r,   a, t) {
    ta = C["base", r] + S["base", r] + W["base", r]
    tb = C["this", r] + S["this", r] + W["this", r]
    printf "| %s | %.1f / %.1f / %.1f = %.1f (%d) | %.1f / %.1f / %.1f = %.1f (%d) | %.3f | %.1f / %.1f |\n", name,
      C["base", r], S["base", r], W["base", r], ta, N["base", r],
      C["this", r], S["this", r], W["this", r], tb, N["this", r],
      (ta > 0 ? tb / ta : 0), B["base", r], B["this", r]
  }
  END {
    print "| depths | base: computing / settling / waiting = wall (steps) | this: likewise | this / base wall | I/O thread busy, base / this |"
    print "|---|---|---|---|---|"
    for (r = 0; r <= last; r++) row(lo[r] "-" hi[r], r)
    row("all", "all")
    # The first step of a new process pays for the first touch of the
    # window and more (1.8-2.6 s of waiting at depths 15-55 of 4v4,
    # against 0.3-0.8 s in the steps after; docs/BENCHMARKS.md, session
    # 88): every turn starts with one, a whole run has one per pair.
    row("all but the first step of each turn", "later")
    # Whole turns (resuming, the steps, their checkpoints): the step
    # lines leave out the checkpoints.
    printf "turns, wall: base %.1f s (%d turns), this %.1f s (%d turns), this / base %.3f\n", TW["base"], TN["base"], TW["this"], TN["this"], TW["this"] / TW["base"]
    printf "turns outside the step lines (resuming, checkpoints): base %.1f s, this %.1f s\n",
      TW["base"] - C["base", "all"] - S["base", "all"] - W["base", "all"], TW["this"] - C["this", "all"] - S["this", "all"] - W["this", "all"]
  }' "$logs/turns.txt" "$logs/steps.txt"


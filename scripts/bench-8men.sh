#!/usr/bin/env bash
# Benchmark: the 8-men table of the default card set under a 1 GiB budget
# (issue 3), a run of hours that may be stopped and resumed, across
# sessions too. Everything lives in DIR:
#   DIR/onitb            the binary, copied in by the first attempt (a
#                        release build, or $ONITB) and used by every resume,
#                        so that the checkpoint stays readable
#   DIR/work, DIR/t8     the work directory and the table (compressed)
#   DIR/time.N.txt       /usr/bin/time -v of attempt N (CPU, wall, peak RSS)
#   DIR/progress.N.log   its progress lines (`--verbose`: one per step)
#   DIR/disk.log         every 10 s: time, work-directory bytes (allocated),
#                        bytes free on the disk
#   DIR/cpu.log          every 10 s: time (Unix seconds), the running
#                        attempt's CPU seconds so far (user, system; from
#                        /proc/PID/stat), and the attempt; DIR/start.N:
#                        when attempt N started (Unix seconds).
#                        `scripts/busy-cores.py DIR [N]` puts them beside
#                        the progress lines: how busy the cores are in each
#                        part of the run
#   DIR/rss.log          every 30 s: time, VmHWM of the running attempt
#                        (kB), then its resident kB now: anonymous in
#                        mappings of 64 MiB or more (the budget's windows
#                        and slice buffers), anonymous in smaller ones and
#                        the heap (malloc's), and file-backed (the binary)
# An attempt resumes from the checkpoint if DIR/work holds one. To stop one
# as a crash would, kill -9 the onitb process (`pgrep -f "$DIR/onitb
# generate" -n`), not /usr/bin/time, whose child would run on unwatched.
# At the end
# (or now, if the table exists) it prints each attempt's CPU and wall time,
# the totals, the peak RSS and disk, and the table's statistics.
#
# usage: scripts/bench-8men.sh DIR [extra generate args...]
#   scripts/bench-8men.sh /work/scratch/run8
set -euo pipefail
dir=${1:?usage: scripts/bench-8men.sh DIR [extra generate args...]}
shift
cd "$(dirname "$0")/.."
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
if [ ! -x "$dir/onitb" ]; then
  if [ -z "${ONITB:-}" ]; then
    cargo build --release --quiet --bin onitb
    ONITB=$PWD/target/release/onitb
  fi
  cp "$ONITB" "$dir/onitb"
fi
report() {
  local cpu=0 wall=0 rss=0
  for t in "$dir"/time.*.txt; do
    [ -e "$t" ] || continue
    if ! grep -q 'User time' "$t"; then
      echo "attempt $(basename "$t" .txt | cut -d. -f2): no /usr/bin/time record (the attempt was killed with it)"
      continue
    fi
    local u s w m
    u=$(awk -F': ' '/User time/ {print $2}' "$t")
    s=$(awk -F': ' '/System time/ {print $2}' "$t")
    w=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$t" |
      awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
    m=$(awk -F': ' '/Maximum resident/ {print $2}' "$t")
    echo "attempt $(basename "$t" .txt | cut -d. -f2): cpu $(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }') s (user $u, sys $s), wall $w s, peak RSS $m KiB"
    cpu=$(awk -v a="$cpu" -v u="$u" -v s="$s" 'BEGIN { print a + u + s }')
    wall=$(awk -v a="$wall" -v w="$w" 'BEGIN { print a + w }')
    rss=$(( m > rss ? m : rss ))
  done
  echo "total: cpu $cpu s, wall $wall s, peak RSS $rss KiB"
  [ -e "$dir/disk.log" ] && sort -k2 -n "$dir/disk.log" | tail -1 |
    awk '{ printf "peak work-directory disk: %s bytes at %s (%s bytes free then)\n", $2, $1, $3 }'
  if [ -d "$dir/t8" ]; then "$dir/onitb" stats "$dir/t8"; fi
}
if [ -d "$dir/t8" ]; then
  report
  exit 0
fi
shopt -s nullglob
attempts=("$dir"/time.*.txt)
shopt -u nullglob
attempt=$(( ${#attempts[@]} + 1 ))
resume=()
[ -e "$dir/work/checkpoint.json" ] && resume=(--resume)
(
  while true; do
    bytes=$({ find "$dir/work" -type f -printf '%b\n' 2>/dev/null || true; } |
      awk '{ s += $1 * 512 } END { printf "%.0f\n", s }')
    echo "$(date +%H:%M:%S) $bytes $(df --output=avail -B1 "$dir" | tail -1)" >>"$dir/disk.log"
    pid=$(pgrep -x -f "$dir/onitb generate.*" | head -1 || true)
    if [ -n "$pid" ]; then
      # User and system time in clock ticks are fields 14 and 15 of
      # /proc/PID/stat: 12 and 13 once the pid and the command (which
      # ends in ") " and may hold spaces) are cut off.
      ticks=$(getconf CLK_TCK)
      sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null |
        awk -v t="$(date +%s)" -v hz="$ticks" -v n="$attempt" \
          '{ printf "%s %.2f %.2f %d\n", t, $12 / hz, $13 / hz, n }' \
          >>"$dir/cpu.log" || true
    fi
    sleep 10
  done
) &
disk_sampler=$!
(
  while true; do
    pid=$(pgrep -x -f "$dir/onitb generate.*" | head -1 || true)
    if [ -n "$pid" ]; then
      hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
      # Per mapping: its size (the first kB line) and Anonymous / Rss.
      split=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { size = -1 }
        /^Size:/ { size = $2 }
        /^Rss:/ { rss += $2 }
        /^Anonymous:/ { if (size >= 65536) big += $2; else small += $2 }
        END { printf "big-anon %d small-anon %d file %d", big, small, rss - big - small }' \
        "/proc/$pid/smaps" 2>/dev/null || true)
      echo "$(date +%H:%M:%S) $hwm kB; $split" >>"$dir/rss.log"
    fi
    sleep 30
  done
) &
rss_sampler=$!
trap 'kill "$disk_sampler" "$rss_sampler" 2>/dev/null || true' EXIT
status=0
# A progress line for every step (where each step's time went), if the
# binary has it (older ones, given as $ONITB, do not).
verbose=()
if "$dir/onitb" generate --help | grep -q -- --verbose; then verbose=(--verbose); fi
date +%s >"$dir/start.$attempt"
/usr/bin/time -v -o "$dir/time.$attempt.txt" "$dir/onitb" generate --men 8 --mem 1GiB --work "$dir/work" \
  --out "$dir/t8" --no-move loss --compress 3 "${resume[@]}" "${verbose[@]}" "$@" \
  2>"$dir/progress.$attempt.log" || status=$?
report
exit "$status"

#!/usr/bin/env bash
# Peak disk use of a streamed generation's work directory: runs `onitb
# generate --work` (release build, or the binary in $ONITB) and samples the
# disk its work files take (allocated blocks, so sparse files count only
# what they hold) every half second. Prints the peak, and at the peak the
# bytes per kind of file (each plane lane in both slots, decision logs,
# capture schedules, packed values), so what a bigger table would need can
# be scaled from a smaller one.
#
# usage: scripts/work-disk.sh MEN MEM [extra generate args...]
#   scripts/work-disk.sh 6 32MiB
#   scripts/work-disk.sh 8 1GiB    # then `pkill -x onitb` to stop part-way
set -euo pipefail
men=${1:?usage: scripts/work-disk.sh MEN MEM [extra generate args...]}
mem=${2:?usage: scripts/work-disk.sh MEN MEM [extra generate args...]}
shift 2
cd "$(dirname "$0")/.."
if [ -z "${ONITB:-}" ]; then
  cargo build --release --quiet --bin onitb
  ONITB=$PWD/target/release/onitb
fi
scratch=$(mktemp -d -p "$PWD/target")
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$scratch"' EXIT
"$ONITB" generate --men "$men" --mem "$mem" --work "$scratch/work" --out "$scratch/out" --quiet "$@" \
  >"$scratch/stdout" &
pid=$!
peak=0
peak_seconds=0
breakdown=""
# Bytes allocated per kind of work file, as "kind bytes" lines.
kinds() {
  { find "$scratch/work" -type f -printf '%f %b\n' 2>/dev/null || true; } | awk '
    { kind = $1; sub(/^[^.]*\./, "", kind)
      if (kind ~ /\.[01]$/) { sub(/\.[01]$/, "", kind); kind = "plane-" kind }
      bytes[kind] += $2 * 512 }
    END { for (k in bytes) printf "%s %.0f\n", k, bytes[k] }' | sort
}
while kill -0 "$pid" 2>/dev/null; do
  now=$({ find "$scratch/work" -type f -printf '%b\n' 2>/dev/null || true; } | awk '{ s += $1 * 512 } END { printf "%.0f\n", s }')
  if [ "$now" -gt "$peak" ]; then
    peak=$now
    peak_seconds=$SECONDS
    breakdown=$(kinds)
  fi
  sleep 0.5
done
# A run killed part-way (to measure the first pairs of a long table)
# still reports its peak so far, and the script exits with the run's status.
status=0
wait "$pid" || status=$?
echo "peak work-directory disk: $peak bytes, ${peak_seconds} s into the run"
echo "at the peak, by kind of file:"
echo "$breakdown" | awk '{ printf "  %-16s %15s\n", $1, $2 }'
exit "$status"

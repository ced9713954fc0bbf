#!/usr/bin/env bash
# Where the in-memory steps' cycles go: builds revision REV in a throwaway
# worktree with time-stamp counter reads in the step kernels
# (scripts/step-cycles.py says which parts), runs `step_times MEN` ROUNDS
# times and prints, for the last pair (3v3 at 6 men), the loss and win
# steps' cycles per part (the win steps' from 98b50c6 on), in millions of
# ticks, and the loss fold's ticks per folded kept move. A back-to-back
# pair of reads costs about 23 ticks here, which each timed part carries
# per visit: compare builds, not parts. x86_64 only; for finding where
# time goes, not for the figures of docs/BENCHMARKS.md's whole-run tables
# (`scripts/ab-generate.sh`).
#
# usage: scripts/step-cycles.sh REV [ROUNDS] [MEN]
#   scripts/step-cycles.sh HEAD 3
set -euo pipefail
rev=${1:?usage: scripts/step-cycles.sh REV [ROUNDS] [MEN]}
rounds=${2:-1}
men=${3:-6}
cd "$(dirname "$0")/.."
here=$PWD
dir=$(mktemp -d "${TMPDIR:-/tmp}/step-cycles.XXXXXX")
trap 'git -C "$here" worktree remove --force "$dir/tree" 2>/dev/null || true; rm -rf "$dir"' EXIT
git worktree add -q --detach "$dir/tree" "$rev"
(cd "$dir/tree" && python3 "$here/scripts/step-cycles.py" && CARGO_TARGET_DIR=$here/target/step-cycles cargo build --release --quiet --example step_times)
for round in $(seq 1 "$rounds"); do
  "$here/target/step-cycles/release/examples/step_times" "$men" 2>&1 | awk -v round="$round" '
    / layouts, .* after the last event/ { v = u = k = d = s = f = p = w = wu = wd = ws = wf = wp = 0; pair = $1 }
    /^PROF depth/ { v += $5; u += $7; k += $9; d += $12; s += $14; f += $16; p += $18 }
    /^PROFW depth/ { w += $5; wu += $7; wd += $9; ws += $11; wf += $13; wp += $15 }
    END {
      printf "round %s, %s: loss steps: %d visits (%d with an undecided layout), Mticks: decided-only visits %.0f, set-up %.0f, fold %.0f, post %.0f, total %.0f; fold ticks per kept move %.1f\n",
        round, pair, v, u, d / 1e6, s / 1e6, f / 1e6, p / 1e6, (d + s + f + p) / 1e6, f / (k ? k : 1)
      printf "round %s, %s: win steps: Mticks %.0f in all; %d visits with an undecided layout, decided-only visits %.0f, set-up %.0f, fold %.0f, post %.0f (zeros: not split at this revision)\n",
        round, pair, w / 1e6, wu, wd / 1e6, ws / 1e6, wf / 1e6, wp / 1e6
    }'
done

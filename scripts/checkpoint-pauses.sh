#!/usr/bin/env bash
# The pauses between 4v4's steps in an 8-men run's progress log (stderr
# of `onitb generate --verbose`, e.g. scripts/bench-8men.sh's
# progress.1.log): per step, the time between its line and the line
# before, less its own computing, settling and waiting. A pause of 1.5 s
# or more is a checkpoint (the lines are stamped to the second, so the
# rest is within +-1 s of zero). Prints how many there were and their sum.
#
# usage: scripts/checkpoint-pauses.sh PROGRESS_LOG
set -euo pipefail
log=${1:?usage: scripts/checkpoint-pauses.sh PROGRESS_LOG}
tr '\r' '\n' < "$log" | awk '/4v4: started/{on=1} on' | grep -E "^\[.*depth [0-9]+ plies, " | awk '
  function secs(t,   m, h) { sub(/[,;)\]]*$/, "", t); if (t ~ /h/) { split(t, h, /h|m|s/); return h[1] * 3600 + h[2] * 60 + h[3] } if (t ~ /m/) { split(t, m, /m|s/); return m[1] * 60 + m[2] } sub(/s$/, "", t); return t + 0 }
  { if ($1 == "[") ts = secs($2); else { t=$1; sub(/^\[/, "", t); ts = secs(t) }
    w = 0; for (i = 3; i <= NF; i++) { if ($i == "computing" || $i == "settling" || $i == "I/O") w += secs($(i + 1)) }
    for (i = 1; i <= NF; i++) if ($i == "depth") d = $(i+1)
    if (prev != "") { g = ts - prev - w; if (g >= 1.5) { big += g; nb++ }; all += g; n++; if (d <= 30) early += (g >= 1.5 ? g : 0) }
    prev = ts }
  END { printf "4v4 step pauses: %d of %d >= 1.5 s, summing to %.1f s (%.1f s up to depth 30); all pauses %.1f s\n", nb, n, big, early, all }'

#!/usr/bin/env bash
# Work-file I/O per solver step of a streamed `onitb generate` run, from its
# progress lines (stderr): for each streamed pair, every interval between two
# "depth N plies, ... states decided" lines (one per 10 plies), with the
# steps it spans, its wall time, the bytes read and written (work-file
# totals, which start again at each pair), per step and per second.
# The first interval of a pair includes its initialisation; intervals of
# less than a second are merged into the next one; the plies after the last
# such line are not shown.
#
# usage: scripts/io-per-step.sh PROGRESS_LOG
#   scripts/io-per-step.sh /work/scratch/run8/progress.1.log
set -euo pipefail
log=${1:?usage: scripts/io-per-step.sh PROGRESS_LOG}
tr '\r' '\n' <"$log" | awk '
  function seconds(stamp,   s, h, m) {
    s = stamp; gsub(/[][ ]/, "", s); h = 0; m = 0
    if (s ~ /h/) { split(s, a, "h"); h = a[1]; s = a[2] }
    if (s ~ /m/) { split(s, a, "m"); m = a[1]; s = a[2] }
    sub(/s$/, "", s)
    return h * 3600 + m * 60 + s
  }
  function bytes(n, unit) {
    if (unit == "KiB") return n * 1024
    if (unit == "MiB") return n * 1024 ^ 2
    if (unit == "GiB") return n * 1024 ^ 3
    if (unit == "TiB") return n * 1024 ^ 4
    return n
  }
  BEGIN {
    OFS = "\t"
    print "pair", "plies", "wall_s", "read_gb", "written_gb", "read_gb_per_step", "written_gb_per_step", "read_mb_s", "written_mb_s"
  }
  / started, / {
    pair = ($0 ~ /streamed from the work directory/) ? $3 : ""
    sub(/:$/, "", pair)
    t0 = seconds(substr($0, 1, index($0, "]"))); first_depth = 0; r0 = 0; w0 = 0
    next
  }
  pair != "" && /plies, [0-9]+ states decided/ && /work files: read/ {
    t = seconds(substr($0, 1, index($0, "]")))
    match($0, /depth [0-9]+ plies/); depth = substr($0, RSTART + 6, RLENGTH - 11) + 0
    match($0, /read [0-9.]+ [KMGT]iB/); split(substr($0, RSTART + 5, RLENGTH - 5), r, " ")
    match($0, /written [0-9.]+ [KMGT]iB/); split(substr($0, RSTART + 8, RLENGTH - 8), w, " ")
    read = bytes(r[1], r[2]); written = bytes(w[1], w[2])
    if (t - t0 < 1) next
    steps = depth - first_depth
    plies = (first_depth == 0 ? "init+" : "") (first_depth + 1) "-" depth
    printf "%s\t%s\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.0f\t%.0f\n", pair, plies, t - t0,
      (read - r0) / 1e9, (written - w0) / 1e9, (read - r0) / 1e9 / steps, (written - w0) / 1e9 / steps,
      (read - r0) / 1e6 / (t - t0), (written - w0) / 1e6 / (t - t0)
    first_depth = depth; t0 = t; r0 = read; w0 = written
  }
' 

# Sourced by the A/B scripts (ab-generate.sh, ab-verify.sh; ab-phase.sh
# for ab_order), from the
# project root: the scratch directory and both builds, rows of "round
# binary cpu_s wall_s max_rss_kib" from /usr/bin/time -v output, and the
# summary of those rows.

# ab_start BASE: sets `scratch` to a directory under target/ (removed on
# exit) holding onitb.base (revision BASE) and onitb.this (the working
# tree), both release builds, and prints the rows' header.
ab_start() {
  scratch=$(mktemp -d -p "$PWD/target")
  trap 'rm -rf "$scratch"' EXIT
  scripts/ab-build.sh "$1" "$scratch"
  printf 'round\tbinary\tcpu_s\twall_s\tmax_rss_kib\n'
}

# ab_order ROUND: the binaries in the order round ROUND runs them: base
# first in odd rounds, this first in even ones, so that neither always
# runs second (right after the other freed its 2 GB, say). Session 74
# saw a seven-round A/B with base always first show a 3% gain that
# other measurements did not.
ab_order() {
  if (( $1 % 2 )); then echo base this; else echo this base; fi
}

# ab_row ROUND WHICH TIME_FILE ROWS_FILE: prints the row of one run (from
# TIME_FILE, /usr/bin/time -v's output) and appends it to ROWS_FILE.
ab_row() {
  local field cpu wall rss
  field() { awk -F': ' -v key="$1" '$0 ~ key {print $2}' "$2"; }
  cpu=$(awk -v u="$(field 'User time' "$3")" -v s="$(field 'System time' "$3")" 'BEGIN { print u + s }')
  wall=$(field 'Elapsed \\(wall clock\\)' "$3" | awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rss=$(field 'Maximum resident' "$3")
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$cpu" "$wall" "$rss" | tee -a "$4"
}

# ab_summary ROWS_FILE: the medians of each binary and the CPU ratio
# this / base of each round.
ab_summary() {
  local which
  median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
  for which in base this; do
    printf 'median\t%s\t%s\t%s\t%s\n' "$which" \
      "$(awk -v w="$which" '$2 == w {print $3}' "$1" | median)" \
      "$(awk -v w="$which" '$2 == w {print $4}' "$1" | median)" \
      "$(awk -v w="$which" '$2 == w {print $5}' "$1" | median)"
  done
  echo "CPU ratio this/base per round:"
  awk '$2 == "base" {b[$1] = $3} $2 == "this" {t[$1] = $3; n[++rounds] = $1}
    END {for (i = 1; i <= rounds; i++) printf "  round %s: %.3f\n", n[i], t[n[i]] / b[n[i]]}' "$1"
}

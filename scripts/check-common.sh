# Sourced by the check scripts (from the project root).

# build_and_scratch: builds the release binary and sets `bin` to it, and
# `work` to a scratch directory on the project disk (not a tmpfs: O_DIRECT
# and real I/O) that is removed on exit.
build_and_scratch() {
  cargo build --release --quiet
  bin=target/release/onitb
  work=$(mktemp -d -p "$PWD/target")
  trap 'rm -rf "$work"' EXIT
}

# same_shards A B compares every shard of table directory A with the
# same-named one in B (cmp, which names the first differing byte) and fails
# unless both hold the same shards. Prints how many there are.
same_shards() {
  local count=0 shard
  for shard in "$1"/*; do
    cmp "$shard" "$2/$(basename "$shard")" >&2
    count=$((count + 1))
  done
  [ "$count" -gt 0 ] && [ "$(ls "$2" | wc -l)" -eq "$count" ]
  echo "$count"
}

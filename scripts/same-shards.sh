# Sourced by the check scripts: same_shards A B compares every shard of
# table directory A with the same-named one in B (cmp, which names the
# first differing byte) and fails unless both hold the same shards. Prints
# how many there are.
same_shards() {
  local count=0 shard
  for shard in "$1"/*; do
    cmp "$shard" "$2/$(basename "$shard")" >&2
    count=$((count + 1))
  done
  [ "$count" -gt 0 ] && [ "$(ls "$2" | wc -l)" -eq "$count" ]
  echo "$count"
}

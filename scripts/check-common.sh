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

# all_card_sets: sets `all` to the 4368 sets of the 16 base cards, each as
# "A,B,C,D,E", in lexicographic order of the cards' places in the rules'
# list (the order scripts/check-card-sets.sh's test picks them in).
all_card_sets() {
  local cards=(Boar Cobra Crab Crane Dragon Eel Elephant Frog Goose Horse Mantis Monkey Ox Rabbit Rooster Tiger)
  local a b c d e
  all=()
  for a in {0..15}; do for b in $(seq $((a + 1)) 15); do for c in $(seq $((b + 1)) 15); do
    for d in $(seq $((c + 1)) 15); do for e in $(seq $((d + 1)) 15); do
      all+=("${cards[a]},${cards[b]},${cards[c]},${cards[d]},${cards[e]}")
    done; done
  done; done; done
}

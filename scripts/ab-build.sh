#!/usr/bin/env bash
# Builds revision BASE and the working tree in release mode, for the A/B
# scripts, and copies the binaries to DEST/onitb.base and DEST/onitb.this.
#
# usage: scripts/ab-build.sh BASE DEST
set -euo pipefail
base_rev=${1:?usage: scripts/ab-build.sh BASE DEST}
dest=${2:?usage: scripts/ab-build.sh BASE DEST}
cd "$(dirname "$0")/.."
root=$PWD
# The base builds in its own tree, with its own target directory (kept
# between runs, so a rebuild is incremental).
base_tree="$root/target/ab-base"
rm -rf "$base_tree/src" "$base_tree/examples" "$base_tree/tests"
mkdir -p "$base_tree"
# -m: the files get the time of extraction. With the commit's time (tar's
# default) cargo took a revision committed before the last build in this
# tree, with no file of that build missing, for fresh, and kept the old
# binary as the base.
git archive "$base_rev" | tar -x -m -C "$base_tree"
(cd "$base_tree" && cargo build --release --quiet --bin onitb)
cargo build --release --quiet --bin onitb
cp "$base_tree/target/release/onitb" "$dest/onitb.base"
cp target/release/onitb "$dest/onitb.this"

#!/usr/bin/env python3
"""Instruments a checkout's step kernels with time-stamp counter reads, for
scripts/step-cycles.sh (never committed: run inside a throwaway worktree).

The loss step's placement visits are split into: set-up (from the visit's
start to its listing: flags, fresh words, the undecided words, the
placement, prefetches, which layouts to look at), the fold of its moves,
and the per-layout work after it (post); visits that find every layout
decided are counted apart. The win step is timed per unit, whole. After
each loss step the solver prints one `PROF` line (the loss step) and one
`PROFW` line (the win step before it). x86_64 only (`_rdtsc`).

Edits by exact text: if the kernels changed so that a pattern no longer
matches, this fails with the pattern, and the patterns need updating.
"""
import sys


def edit(path, edits, optional=False):
    """Applies (old, new, scope) replacements, each at the first `old` after
    `scope`; with `optional`, all or none (a revision whose code differs
    keeps it as it is, and its parts print as zeros)."""
    text = open(path).read()
    for old, new, scope in edits:
        start = text.index(scope) if scope else 0
        at = text.find(old, start)
        if at < 0:
            if optional:
                return False
            sys.exit(f"step-cycles: pattern not found in {path}:\n{old}")
        text = text[:at] + new + text[at + len(old):]
    open(path, "w").write(text)
    return True


LOSS = "pub(super) fn loss_step("
WIN = "pub(super) fn win_step("
edit("src/solver/kernel.rs", [
    ("/// Bytes of a cache line (x86_64 and most others), the step of prefetches",
     "pub static PROF: [std::sync::atomic::AtomicU64; 16] = [const { std::sync::atomic::AtomicU64::new(0) }; 16];\n"
     "#[inline(always)]\nfn tsc() -> u64 { unsafe { core::arch::x86_64::_rdtsc() } }\n"
     "pub fn prof_take() -> [u64; 16] { std::array::from_fn(|i| PROF[i].swap(0, std::sync::atomic::Ordering::Relaxed)) }\n"
     "/// Bytes of a cache line (x86_64 and most others), the step of prefetches", None),
    ("    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {\n",
     "    let t_unit = tsc();\n    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {\n", WIN),
    ("    });\n    report\n}",
     "    });\n    PROF[15].fetch_add(tsc() - t_unit, std::sync::atomic::Ordering::Relaxed);\n    report\n}", WIN),
    ("    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {\n",
     "    let mut c = [0u64; 16];\n    let t_unit = tsc();\n"
     "    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {\n"
     "        let t0 = tsc();\n        c[0] += 1;\n", LOSS),
    ("                live.put(flag, false);\n            }\n            return;\n        };\n",
     "                live.put(flag, false);\n            }\n            c[1] += tsc() - t0;\n            return;\n        };\n"
     "        c[2] += 1;\n", LOSS),
    ("        let listing = listing(input, first_placement + i, needed);\n",
     "        let listing = listing(input, first_placement + i, needed);\n"
     "        if let Listing::Kept(k, _, _) = listing { c[5] += k.moves.len() as u64 * needed as u64; }\n"
     "        let t1 = tsc();\n        c[3] += t1 - t0;\n", LOSS),
    ("                all_won & (word | !states)\n            });\n",
     "                all_won & (word | !states)\n            });\n        let t2 = tsc();\n        c[6] += t2 - t1;\n", LOSS),
    ("    });\n    report\n}",
     "        c[7] += tsc() - t2;\n    });\n    c[9] += tsc() - t_unit;\n"
     "    for (k, v) in c.iter().enumerate() { PROF[k].fetch_add(*v, std::sync::atomic::Ordering::Relaxed); }\n"
     "    report\n}", LOSS),
])
# The win step's parts (since 98b50c6, whose visits end in `sides.mark`):
# set-up, fold, per-layout work, and visits with every layout decided,
# into PROF[10..15].
edit("src/solver/kernel.rs", [
    ("    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {\n",
     "    let mut cw = [0u64; 5];\n"
     "    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {\n"
     "        let t0 = tsc();\n", WIN),
    ("        let Some((undecided, open)) = undecided_layouts(own.won, own.lost, first, p * q) else { return };\n",
     "        let Some((undecided, open)) = undecided_layouts(own.won, own.lost, first, p * q) else {\n"
     "            cw[0] += tsc() - t0;\n            return;\n        };\n        cw[4] += 1;\n", WIN),
    ("        let listing = listing(input, first_placement + i, needed);\n",
     "        let listing = listing(input, first_placement + i, needed);\n        let t1 = tsc();\n        cw[1] += t1 - t0;\n", WIN),
    ("|reach, word, states| reach | (word & states));\n",
     "|reach, word, states| reach | (word & states));\n        let t2 = tsc();\n        cw[2] += t2 - t1;\n", WIN),
    ("        sides.mark(input.own_sides, &place, image.as_ref());\n    });\n",
     "        sides.mark(input.own_sides, &place, image.as_ref());\n        cw[3] += tsc() - t2;\n    });\n"
     "    for (k, v) in cw.iter().enumerate() { PROF[10 + k].fetch_add(*v, std::sync::atomic::Ordering::Relaxed); }\n", WIN),
], optional=True)
edit("src/solver/mod.rs", [
    ("        state.depth_plies = depth;\n        state.decided += new;\n",
     "        state.depth_plies = depth;\n        state.decided += new;\n"
     "        if depth % 2 == 0 {\n            let c = kernel::prof_take();\n"
     "            eprintln!(\"PROF depth {depth} visits {} undecided {} kept_moves {} cycles: decided_only {} set_up {} fold {} post {} unit {}\", "
     "c[0], c[2], c[5], c[1], c[3], c[6], c[7], c[9]);\n"
     "            eprintln!(\"PROFW depth {} cycles {} undecided {} decided_only {} set_up {} fold {} post {}\", "
     "depth - 1, c[15], c[14], c[10], c[11], c[12], c[13]);\n        }\n", None),
])

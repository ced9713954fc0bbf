//! Change flags: which parts of a material changed in the current step and
//! in the last one, so a step can skip layouts and whole groups whose
//! successors did not change; and which placements may hold a `fresh`
//! loss, so a win step can skip successor blocks that hold none.
//!
//! Flags are only set during a step and read in the next, so what is
//! skipped does not depend on timing or thread count. They are a pure
//! optimisation: setting every flag (as a resumed run does) gives the same
//! table, only slower.

use crate::index::{Layout, side_key, side_keys};
use crate::rules::rotate;
#[cfg(test)]
use crate::rules::rotate_square;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Per mover side (board and master, see [`side_key`]). Every successor of a
/// layout has the same mover side (the turned opponent side), so a layout
/// whose successors' side did not change need not be looked at again.
pub(super) struct SideFlags {
    now: Vec<AtomicBool>,
    last: Vec<AtomicBool>,
}

impl SideFlags {
    pub fn new(mover_pieces: usize) -> SideFlags {
        let flags = |value| (0..side_keys(mover_pieces)).map(|_| AtomicBool::new(value)).collect();
        SideFlags { now: flags(false), last: flags(true) }
    }

    /// Ends a step: what changed now is what changed last for the next one.
    pub fn end_step(&mut self) {
        std::mem::swap(&mut self.now, &mut self.last);
        self.now.par_iter().for_each(|flag| flag.store(false, Ordering::Relaxed));
    }

    #[inline]
    pub fn mark_changed(&self, layout: &Layout) {
        self.now[side_key(layout.mover, layout.mover_master)].store(true, Ordering::Relaxed);
    }

    /// Did the mover side of this layout's successors (in the material these
    /// flags belong to) change in the last step?
    #[cfg(test)]
    pub fn successors_changed(&self, layout: &Layout) -> bool {
        let key = side_key(rotate(layout.opponent), rotate_square(layout.opponent_master));
        self.last[key].load(Ordering::Relaxed)
    }

    /// [`SideFlags::successors_changed`] for every choice of the opponent's
    /// master on board `opponent`: `changed[b]` for its b-th piece in square
    /// order. The board's rank is worked out once: turning reverses square
    /// order, so the b-th piece is the (q - 1 - b)-th once turned.
    #[inline]
    pub fn successors_changed_by_master(&self, opponent: u32, changed: &mut [bool]) {
        let turned = rotate(opponent);
        let q = changed.len();
        debug_assert_eq!(opponent.count_ones() as usize, q);
        let first = side_key(turned, turned.trailing_zeros() as u8);
        for (b, changed) in changed.iter_mut().enumerate() {
            *changed = self.last[first + q - 1 - b].load(Ordering::Relaxed);
        }
    }
}

/// Per group of a material: did any state of it get decided?
pub(super) struct GroupFlags {
    pub now: Vec<bool>,
    pub last: Vec<bool>,
}

impl GroupFlags {
    pub fn new(groups: usize) -> GroupFlags {
        GroupFlags { now: vec![false; groups], last: vec![true; groups] }
    }

    pub fn end_step(&mut self) {
        std::mem::swap(&mut self.now, &mut self.last);
        self.now.fill(false);
    }
}

/// Per placement of a resident material with kept move lists: may its
/// `fresh` words hold a loss? A clear flag means every `fresh` word of the
/// placement's layouts is zero, so a win step's fold of that successor
/// block would change nothing and is skipped without reading the block
/// (at 6 men, 57% of the blocks the win steps fold are zero, and 47% are
/// skipped this way; docs/BENCHMARKS.md).
///
/// A placement's flag is found from where its block (p * q words) starts
/// in the plane lanes: that element shifted right by floor(log2(p * q)),
/// which differs for every block (block starts are at least p * q apart)
/// and needs no division, so the mirror's kept moves find it from their
/// block's offset alone. Some numbers go unused: up to twice as many flags
/// as placements (at 3v3, 500 KB for 3.5 M placements).
///
/// Loss steps, which alone write `fresh`, keep the flags: they clear a
/// placement's flag when they clear its words and set it when they write a
/// loss; each worker touches only its own placements, but neighbours share
/// a word of flags, hence the atomics. Win steps read them in the next
/// step. Every flag starts set (nothing known), so initialisation's
/// no-move losses need no bookkeeping, and a flag left set only costs a
/// read.
pub(super) struct PlacementFlags {
    words: Vec<AtomicU64>,
    /// floor(log2(p * q)): a block's flag is its first element >> this.
    shift: u32,
}

impl PlacementFlags {
    /// Flags of a material whose plane lanes have `elements` elements and
    /// whose blocks are `block_words` words, every one set.
    pub fn all_set(elements: usize, block_words: usize) -> PlacementFlags {
        let shift = block_words.ilog2();
        let words = Self::flags(elements, shift).div_ceil(64);
        PlacementFlags { words: (0..words).map(|_| AtomicU64::new(u64::MAX)).collect(), shift }
    }

    fn flags(elements: usize, shift: u32) -> usize {
        (elements >> shift) + 1
    }

    /// Bytes [`PlacementFlags::all_set`] takes.
    pub fn bytes(elements: usize, block_words: usize) -> u64 {
        Self::flags(elements, block_words.ilog2()).div_ceil(64) as u64 * 8
    }

    /// The word and bit of the block starting at lane element `element`.
    #[inline(always)]
    fn bit(&self, element: usize) -> (&AtomicU64, u64) {
        let flag = element >> self.shift;
        (&self.words[flag / 64], 1 << (flag % 64))
    }

    /// The flag of the block starting at lane element `element`.
    #[inline(always)]
    pub fn get(&self, element: usize) -> bool {
        let (word, bit) = self.bit(element);
        word.load(Ordering::Relaxed) & bit != 0
    }

    /// Sets the flag; the atomic write only if it was clear.
    #[inline]
    pub fn set(&self, element: usize) {
        let (word, bit) = self.bit(element);
        if word.load(Ordering::Relaxed) & bit == 0 {
            word.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Clears the flag; the atomic write only if it was set.
    #[inline]
    pub fn clear(&self, element: usize) {
        let (word, bit) = self.bit(element);
        if word.load(Ordering::Relaxed) & bit != 0 {
            word.fetch_and(!bit, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Layout;

    /// Flags start set; clearing and setting one block's flag touches no
    /// other block's, across word boundaries too, for every block size.
    #[test]
    fn placement_flags_set_and_clear_one_block_at_a_time() {
        for block_words in 1..=25 {
            // Blocks at least `block_words` apart, with a gap (padding).
            let starts: Vec<usize> = (0..300).map(|k| k * block_words + if k >= 150 { 1024 } else { 0 }).collect();
            let elements = starts.last().unwrap() + block_words;
            let flags = PlacementFlags::all_set(elements, block_words);
            assert_eq!(flags.words.len() as u64 * 8, PlacementFlags::bytes(elements, block_words));
            assert!(starts.iter().all(|&at| flags.get(at)));
            let chosen = [0, 63, 64, 127, 149, 150, 299];
            for &k in &chosen {
                flags.clear(starts[k]);
            }
            flags.clear(starts[63]);
            let cleared: Vec<usize> = (0..300).filter(|&k| !flags.get(starts[k])).collect();
            assert_eq!(cleared, chosen, "{block_words}-word blocks");
            flags.set(starts[64]);
            flags.set(starts[65]);
            assert!(flags.get(starts[64]) && flags.get(starts[65]) && !flags.get(starts[63]));
        }
    }

    /// The per-board answer agrees with asking layout by layout.
    #[test]
    fn successors_changed_by_master_agrees_with_each_layout() {
        let mut flags = SideFlags::new(3);
        // Mark some sides changed, then make that the last step's.
        let marked = [(0b111u32 << 3, 3u8), (0b1_0000_0000_0000_0000_0101, 2), (1 << 24 | 1 << 12 | 1, 12)];
        for (board, master) in marked {
            flags.mark_changed(&Layout { mover: board, opponent: 0, mover_master: master, opponent_master: 0 });
        }
        flags.end_step();
        let mut seen_true = 0;
        for opponent in [0b111u32 << 19, 0b1_0100_0000_0000_0000_0000_0000 >> 1, 1 | 1 << 12 | 1 << 24, 0b10101 << 5] {
            let opponent = opponent & ((1 << 25) - 1);
            if opponent.count_ones() != 3 {
                continue;
            }
            let mut changed = [false; 3];
            flags.successors_changed_by_master(opponent, &mut changed);
            let mut rest = opponent;
            for changed in changed {
                let master = rest.trailing_zeros() as u8;
                rest &= rest - 1;
                let layout = Layout { mover: 0, opponent, mover_master: 0, opponent_master: master };
                assert_eq!(changed, flags.successors_changed(&layout));
                seen_true += changed as usize;
            }
        }
        assert!(seen_true > 0, "some of the boards turn onto a marked side");
    }
}

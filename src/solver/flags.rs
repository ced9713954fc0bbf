//! Change flags: which parts of a material changed in the current step and
//! in the last one, so a step can skip layouts and whole groups whose
//! successors did not change; and which placements may hold a `fresh`
//! loss, so a win step can skip successor blocks that hold none.
//!
//! Flags are only set during a step and read in the next, so what is
//! skipped does not depend on timing or thread count. They are a pure
//! optimisation: setting every flag (as a resumed run does) gives the same
//! table, only slower.

use super::lanes::SEGMENT_ALIGN_BYTES;
use crate::index::{Layout, board_rank, boards};
#[cfg(test)]
use crate::rules::rotate_square;
use crate::rules::{MAX_PIECES_PER_SIDE, rotate};
use rayon::prelude::*;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// Elements (plane words) between lane segment starts: segments start on
/// [`SEGMENT_ALIGN_BYTES`] boundaries.
const SEGMENT_ELEMENTS: usize = SEGMENT_ALIGN_BYTES as usize / 4;

// A segment's flags are whole words even for the largest blocks (p * q =
// 25: a flag per 16 elements), so that filling one part of a slice buffer
// touches no flag word of another part ([`PlacementFlags::clear_segments`]).
const _: () = assert!((SEGMENT_ELEMENTS >> (MAX_PIECES_PER_SIDE * MAX_PIECES_PER_SIDE).ilog2()).is_multiple_of(64));

/// Per mover side (board and master). Every successor of a layout has the
/// same mover side (the turned opponent side), so a layout whose
/// successors' side did not change need not be looked at again.
///
/// A byte per board ([`board_rank`]), bit k for the master being the
/// board's k-th piece in square order: a visit asks for every master of
/// one board with one load, and marks its masters with at most one
/// read-modify-write (a flag per (board, master), asked a master at a
/// time, was 2.2% more instructions at 6 men: docs/BENCHMARKS.md, session
/// 77).
pub(super) struct SideFlags {
    now: Vec<AtomicU8>,
    last: Vec<AtomicU8>,
}

// A board's masters are bits of a byte.
const _: () = assert!(MAX_PIECES_PER_SIDE <= 8);

impl SideFlags {
    pub fn new(mover_pieces: usize) -> SideFlags {
        let flags = |value| (0..boards(mover_pieces)).map(|_| AtomicU8::new(value)).collect();
        SideFlags { now: flags(0), last: flags(u8::MAX) }
    }

    /// Ends a step: what changed now is what changed last for the next one.
    pub fn end_step(&mut self) {
        std::mem::swap(&mut self.now, &mut self.last);
        self.now.par_iter().for_each(|flag| flag.store(0, Ordering::Relaxed));
    }

    #[inline]
    pub fn mark_changed(&self, layout: &Layout) {
        let ordinal = (layout.mover & ((1u32 << layout.mover_master) - 1)).count_ones();
        self.mark_changed_masters(layout.mover, 1 << ordinal);
    }

    /// [`SideFlags::mark_changed`] for the layouts with mover board `mover`
    /// and the masters in `masters` (bit a: its a-th piece in square
    /// order), the board's rank worked out once.
    #[inline]
    pub fn mark_changed_masters(&self, mover: u32, masters: u8) {
        debug_assert!(u32::from(masters) >> mover.count_ones() == 0, "masters are pieces of the board");
        let flags = &self.now[board_rank(mover)];
        // Bits are only set during a step: one already set stays so, and
        // the locked `or` is needed only for bits not yet seen set.
        if flags.load(Ordering::Relaxed) & masters != masters {
            flags.fetch_or(masters, Ordering::Relaxed);
        }
    }

    /// Did the mover side of this layout's successors (in the material these
    /// flags belong to) change in the last step?
    #[cfg(test)]
    pub fn successors_changed(&self, layout: &Layout) -> bool {
        let turned = rotate(layout.opponent);
        let ordinal = (turned & ((1u32 << rotate_square(layout.opponent_master)) - 1)).count_ones();
        self.last[board_rank(turned)].load(Ordering::Relaxed) >> ordinal & 1 != 0
    }

    /// [`SideFlags::successors_changed`] for every choice of the opponent's
    /// master on board `opponent`, as a bit set: bit b for its b-th piece in
    /// square order. Turning reverses square order, so the b-th piece is
    /// the (q - 1 - b)-th once turned.
    #[inline]
    pub fn successors_changed_by_master(&self, opponent: u32) -> u8 {
        let turned = rotate(opponent);
        let q = opponent.count_ones();
        let changed = self.last[board_rank(turned)].load(Ordering::Relaxed);
        changed.reverse_bits() >> (8 - q)
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
/// Loss steps, which alone write `fresh`, keep the flags through a
/// [`FlagWriter`] per unit: they clear a placement's flag when they clear
/// its words and set it when they write a loss. Each worker touches only
/// its own placements, but neighbouring units share a word of flags, hence
/// the atomics (for the words at a unit's edges only). Win steps read them
/// in the next step. Every flag starts set (nothing known), so initialisation's
/// no-move losses need no bookkeeping, and a flag left set only costs a
/// read.
///
/// A streamed step keeps the same kind of flags per slice buffer, for the
/// blocks of the landing slice it holds (numbered by their element in the
/// buffer): which blocks are laid and read. A win step's: filling the
/// slice from the mirror's decision log ([`PlacementFlags::marker`]) sets
/// exactly the flags of the blocks that get a loss, the rest stay clear
/// (and read as zero). A loss step's: the groups read from disk, and the
/// blocks of hole groups that records are laid over (the rest read as
/// holes).
pub(super) struct PlacementFlags {
    words: Vec<AtomicU64>,
    /// floor(log2(p * q)): a block's flag is its first element >> this.
    shift: u32,
    /// p * q, the words of a block.
    block_words: usize,
}

/// [`PlacementFlags`] read by block, for one lane ([`PlacementFlags::in_lane`]):
/// a listing asks for the flag of every move's block, and works out the
/// lane's start and the shift once per placement, not once per move.
#[derive(Clone, Copy)]
pub(super) struct LaneFlags<'a> {
    words: &'a [AtomicU64],
    lane: &'a [u32],
    /// floor(log2(p * q)) + 2: a block's flag is its byte offset in the
    /// lane shifted right by this.
    byte_shift: u32,
}

impl LaneFlags<'_> {
    /// The flag of `block`, a block of the lane.
    #[inline(always)]
    pub fn get(&self, block: &[u32]) -> bool {
        debug_assert!(self.lane.as_ptr_range().contains(&block.as_ptr()), "the block lies in the flags' lane");
        let flag = (block.as_ptr() as usize - self.lane.as_ptr() as usize) >> self.byte_shift;
        self.words[flag / 64].load(Ordering::Relaxed) >> (flag % 64) & 1 != 0
    }
}

impl PlacementFlags {
    /// Flags of a material whose plane lanes have `elements` elements and
    /// whose blocks are `block_words` words, every one set.
    pub fn all_set(elements: usize, block_words: usize) -> PlacementFlags {
        Self::filled(elements, block_words, u64::MAX)
    }

    /// As [`PlacementFlags::all_set`], every flag clear.
    pub fn all_clear(elements: usize, block_words: usize) -> PlacementFlags {
        Self::filled(elements, block_words, 0)
    }

    /// A copy of the flags as they are now.
    pub fn copy(&self) -> PlacementFlags {
        let words = self.words.iter().map(|word| AtomicU64::new(word.load(Ordering::Relaxed))).collect();
        PlacementFlags { words, shift: self.shift, block_words: self.block_words }
    }

    fn filled(elements: usize, block_words: usize, word: u64) -> PlacementFlags {
        let shift = block_words.ilog2();
        let words = Self::flags(elements, shift).div_ceil(64);
        PlacementFlags { words: (0..words).map(|_| AtomicU64::new(word)).collect(), shift, block_words }
    }

    fn flags(elements: usize, shift: u32) -> usize {
        (elements >> shift) + 1
    }

    /// The words of a block: p * q.
    pub fn block_words(&self) -> usize {
        self.block_words
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

    /// The flags as the blocks of `lane` (the lane they number) find them.
    #[inline(always)]
    pub fn in_lane<'a>(&'a self, lane: &'a [u32]) -> LaneFlags<'a> {
        LaneFlags { words: &self.words, lane, byte_shift: self.shift + 2 }
    }

    /// Sets or clears the flag of the block starting at lane element
    /// `element`, atomically (the solved placements, flagged group by
    /// group in parallel; a resident loss step dropping a placement from
    /// its walk).
    #[inline]
    pub fn put(&self, element: usize, set: bool) {
        let (word, bit) = self.bit(element);
        if set {
            word.fetch_or(bit, Ordering::Relaxed);
        } else {
            word.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// [`PlacementFlags::put`] for a flag whose word no other thread
    /// writes meanwhile, as a load and (if it changes) a store instead of
    /// a locked read-modify-write: a mirroring loss step's images' flags
    /// (its units are whole groups, and a group's flags are whole words,
    /// see [`PlacementFlags::clear_segments`]; a unit's [`FlagWriter`]
    /// loads the word again before it stores it).
    #[inline]
    pub fn put_unshared(&self, element: usize, set: bool) {
        let (word, bit) = self.bit(element);
        let now = word.load(Ordering::Relaxed);
        let new = if set { now | bit } else { now & !bit };
        if new != now {
            word.store(new, Ordering::Relaxed);
        }
    }

    /// The first `k` in `from..blocks` whose block, starting at lane
    /// element `origin + k * block_words`, has its flag set: a word of
    /// clear flags is passed over at once, so a step walks the live
    /// placements of a group where few are without looking at the others.
    #[inline]
    pub fn next_set(&self, origin: usize, from: usize, blocks: usize) -> Option<usize> {
        // The first block whose start is at or after lane element `element`.
        let block_at = |element: usize| element.saturating_sub(origin).div_ceil(self.block_words);
        let mut k = from;
        while k < blocks {
            let flag = (origin + k * self.block_words) >> self.shift;
            let rest = self.words[flag / 64].load(Ordering::Relaxed) >> (flag % 64);
            if rest & 1 != 0 {
                return Some(k);
            }
            // The next set flag of the word, or the next word's first. Not
            // every flag number is a block's (see the type's comment), so
            // the block found is looked at again; each turn moves on.
            let next_flag = if rest == 0 { (flag / 64 + 1) * 64 } else { flag + rest.trailing_zeros() as usize };
            k = block_at(next_flag << self.shift).max(k + 1);
        }
        None
    }

    /// The `k` in `0..blocks` whose block, starting at lane element
    /// `origin + k * block_words`, has its flag set, in increasing order
    /// ([`PlacementFlags::next_set`] in turn: words of clear flags are
    /// passed over at once).
    pub fn set_blocks(&self, origin: usize, blocks: usize) -> impl Iterator<Item = usize> + '_ {
        let mut from = 0;
        std::iter::from_fn(move || {
            let k = self.next_set(origin, from, blocks)?;
            from = k + 1;
            Some(k)
        })
    }

    /// [`PlacementFlags::set_blocks`] as runs of consecutive `k`.
    pub fn set_runs(&self, origin: usize, blocks: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut set = self.set_blocks(origin, blocks).peekable();
        std::iter::from_fn(move || {
            let start = set.next()?;
            let mut end = start + 1;
            while set.next_if_eq(&end).is_some() {
                end += 1;
            }
            Some(start..end)
        })
    }

    /// Clears the flags of the blocks starting in `elements`, a range
    /// whose ends are lane segment boundaries. Those are 1024 elements
    /// apart, and 1024 >> floor(log2(p * q)) is a multiple of 64 for up to
    /// 25 words a block, so the range covers whole words of flags and no
    /// other range's.
    pub fn clear_segments(&mut self, elements: std::ops::Range<usize>) {
        debug_assert!(elements.start.is_multiple_of(SEGMENT_ELEMENTS) && elements.end.is_multiple_of(SEGMENT_ELEMENTS));
        let words = (elements.start >> self.shift) / 64..(elements.end >> self.shift).div_ceil(64);
        self.words[words].iter_mut().for_each(|word| *word.get_mut() = 0);
    }

    /// Sets the flags of the blocks starting in `elements`, a range whose
    /// ends are lane segment boundaries (see
    /// [`PlacementFlags::clear_segments`]).
    pub fn set_segments(&mut self, elements: std::ops::Range<usize>) {
        debug_assert!(elements.start.is_multiple_of(SEGMENT_ELEMENTS) && elements.end.is_multiple_of(SEGMENT_ELEMENTS));
        let words = (elements.start >> self.shift) / 64..(elements.end >> self.shift).div_ceil(64);
        self.words[words].iter_mut().for_each(|word| *word.get_mut() = u64::MAX);
    }

    /// Sets (`set`) or clears the flags of the blocks starting in
    /// `elements`, lane segments as for [`PlacementFlags::clear_segments`],
    /// through a shared reference: the words are the segments' alone, so
    /// groups laid out in parallel each write their own
    /// (`window::OwnBuffers::prepare`).
    pub fn put_segments(&self, elements: std::ops::Range<usize>, set: bool) {
        debug_assert!(elements.start.is_multiple_of(SEGMENT_ELEMENTS) && elements.end.is_multiple_of(SEGMENT_ELEMENTS));
        let words = (elements.start >> self.shift) / 64..(elements.end >> self.shift).div_ceil(64);
        let value = if set { u64::MAX } else { 0 };
        self.words[words].iter().for_each(|word| word.store(value, Ordering::Relaxed));
    }

    /// A marker for the blocks of a group whose segment starts at element
    /// `first`: [`BlockMarker::mark`] sets a layout's block's flag.
    pub fn marker(&mut self, first: usize) -> BlockMarker<'_> {
        debug_assert!(first.is_multiple_of(SEGMENT_ELEMENTS), "a segment's first element");
        BlockMarker { flags: self, first, block: 0..0 }
    }

    /// A writer for the flags of the blocks starting at `elements` (one
    /// unit's layouts), each block cleared, and maybe set, in increasing
    /// order.
    pub fn writer(&self, elements: std::ops::Range<usize>) -> FlagWriter<'_> {
        FlagWriter { flags: self, elements, word: usize::MAX, touched: 0, set: 0 }
    }
}

/// Sets the flags of the blocks of one group's layouts, as a win step's
/// landing slice is filled from the log ([`PlacementFlags::marker`]).
pub(super) struct BlockMarker<'a> {
    flags: &'a mut PlacementFlags,
    /// The element the group's segment starts at.
    first: usize,
    /// The layouts of the block marked last.
    block: std::ops::Range<usize>,
}

impl BlockMarker<'_> {
    /// Sets the flag of the block holding layout `n` of the group, and
    /// returns the block's layouts (within the group) if the flag was
    /// clear: a block whose flag is clear holds no meaningful words, so
    /// the caller lays them before writing any. A division per block, not
    /// per layout: consecutive layouts of one block, the common case, set
    /// its flag once.
    #[inline]
    pub fn mark(&mut self, n: usize) -> Option<std::ops::Range<usize>> {
        if self.block.contains(&n) {
            return None;
        }
        let block_words = self.flags.block_words;
        let start = n - n % block_words;
        self.block = start..start + block_words;
        let flag = (self.first + start) >> self.flags.shift;
        let (word, bit) = (self.flags.words[flag / 64].get_mut(), 1 << (flag % 64));
        let was_clear = *word & bit == 0;
        *word |= bit;
        was_clear.then(|| self.block.clone())
    }
}

/// Rewrites the flags of one unit's blocks (a loss step's), gathering a
/// word of flags before writing it: a word all of whose blocks start
/// inside the unit's elements is the unit's alone and is stored plainly;
/// only the words at the unit's edges, shared with neighbours, take atomic
/// read-modify-writes, and only of the unit's own bits. (An atomic per
/// placement, as before, was about 5% of the loss steps' samples: a locked
/// instruction waits for the loads before it.) Written when the writer
/// moves to the next word and when it is dropped.
pub(super) struct FlagWriter<'a> {
    flags: &'a PlacementFlags,
    elements: std::ops::Range<usize>,
    /// The word being gathered (`usize::MAX`: none yet).
    word: usize,
    /// Its flags given a value, and those of them set.
    touched: u64,
    set: u64,
}

impl FlagWriter<'_> {
    /// Starts the block at lane element `element` (after every block
    /// started before it) with its flag clear.
    #[inline]
    pub fn clear(&mut self, element: usize) {
        debug_assert!(self.elements.contains(&element), "a block of the unit");
        let flag = element >> self.flags.shift;
        if flag / 64 != self.word {
            self.write();
            self.word = flag / 64;
        }
        let bit = 1 << (flag % 64);
        self.touched |= bit;
        self.set &= !bit;
    }

    /// Sets the flag of a block started before, at `element`: the one
    /// started last, or the one before it, whose word may be written
    /// already (a step folds a placement after it has listed the next,
    /// `kernel::for_each_placement_listed_ahead`, which may have started a
    /// block in the next word).
    #[inline]
    pub fn set(&mut self, element: usize) {
        debug_assert!(self.elements.contains(&element), "a block of the unit");
        let flag = element >> self.flags.shift;
        if flag / 64 == self.word {
            self.set |= 1 << (flag % 64);
        } else {
            debug_assert!(flag / 64 < self.word, "a block started before");
            self.flags.words[flag / 64].fetch_or(1 << (flag % 64), Ordering::Relaxed);
        }
    }

    /// Writes the gathered word.
    fn write(&mut self) {
        if self.touched == 0 {
            return;
        }
        let word = &self.flags.words[self.word];
        let span = 64usize << self.flags.shift;
        let (first, end) = (self.word * span, (self.word + 1) * span);
        if self.elements.start <= first && end <= self.elements.end {
            // No other unit has a block starting in this word, so no other
            // thread writes it; the flags this writer did not touch (a
            // mirroring step's images, kept with `PlacementFlags::put`)
            // stay as they are.
            let now = word.load(Ordering::Relaxed);
            word.store((now & !self.touched) | self.set, Ordering::Relaxed);
        } else {
            // Only this writer changes its bits, so the load tells which
            // of them need changing.
            let (now, clear) = (word.load(Ordering::Relaxed), self.touched & !self.set);
            if now & clear != 0 {
                word.fetch_and(!clear, Ordering::Relaxed);
            }
            if now & self.set != self.set {
                word.fetch_or(self.set, Ordering::Relaxed);
            }
        }
        (self.touched, self.set) = (0, 0);
    }
}

impl Drop for FlagWriter<'_> {
    fn drop(&mut self) {
        self.write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Layout;

    /// Runs of set blocks are the blocks whose flags are set, consecutive
    /// ones together, and only those of the range asked for.
    #[test]
    fn set_runs_join_consecutive_set_blocks() {
        let block_words = 12;
        let mut live = PlacementFlags::all_clear(3 * 1024, block_words);
        // A group of whole placements in the second segment.
        let placements = 1024 / block_words;
        let mut marker = live.marker(1024);
        for k in [0, 1, 2, 5, 7, 8, placements - 1] {
            marker.mark(k * block_words + 3);
        }
        let runs: Vec<std::ops::Range<usize>> = live.set_runs(1024, placements).collect();
        assert_eq!(runs, vec![0..3, 5..6, 7..9, placements - 1..placements]);
        assert_eq!(live.set_runs(0, placements).count(), 0, "the first segment has none");
        assert_eq!(live.set_runs(2048, placements).count(), 0, "the third segment has none");
        let all = PlacementFlags::all_set(3 * 1024, block_words);
        assert_eq!(all.set_runs(1024, placements).collect::<Vec<_>>(), vec![0..placements]);
    }

    /// A copy holds the flags as they were, and changes apart from them.
    #[test]
    fn a_copy_is_a_snapshot() {
        let block_words = 9;
        let flags = PlacementFlags::all_clear(4096, block_words);
        for at in [0, 9 * 7, 9 * 64, 9 * 300] {
            flags.put(at, true);
        }
        let copy = flags.copy();
        flags.put(9 * 7, false);
        copy.put(9 * 65, true);
        let set = |f: &PlacementFlags| (0..4096 / 9).filter(|k| f.get(k * 9)).collect::<Vec<_>>();
        assert_eq!(set(&copy), vec![0, 7, 64, 65, 300]);
        assert_eq!(set(&flags), vec![0, 64, 300]);
    }

    /// A block's flag found from its slice of the lane is the flag of its
    /// first element, for every block size and for blocks whose flags lie
    /// in either half of a word.
    #[test]
    fn a_lanes_blocks_find_their_own_flags() {
        for block_words in 1..=25 {
            let elements = 2 * SEGMENT_ELEMENTS;
            let flags = PlacementFlags::all_clear(elements, block_words);
            let starts: Vec<usize> = (0..elements - block_words).step_by(block_words).collect();
            for (k, &at) in starts.iter().enumerate() {
                flags.put(at, k % 3 == 1 || k % 64 == 63);
            }
            let lane = vec![0u32; elements];
            let in_lane = flags.in_lane(&lane);
            for &at in &starts {
                assert_eq!(in_lane.get(&lane[at..at + block_words]), flags.get(at), "{block_words}-word block at {at}");
            }
        }
    }

    /// Flags start set; writers over units of blocks give each block the
    /// flag written last for it and touch no other block's, across word
    /// boundaries and at the units' edges, for every block size.
    #[test]
    fn placement_flags_are_rewritten_unit_by_unit() {
        for block_words in 1..=25 {
            // Blocks at least `block_words` apart, with a gap (padding).
            let starts: Vec<usize> = (0..300).map(|k| k * block_words + if k >= 150 { 1024 } else { 0 }).collect();
            let elements = starts.last().unwrap() + block_words;
            let flags = PlacementFlags::all_set(elements, block_words);
            assert_eq!(flags.words.len() as u64 * 8, PlacementFlags::bytes(elements, block_words));
            assert!(starts.iter().all(|&at| flags.get(at)));
            // Units of blocks 0..37, 37..150, 150..300 (some with no block
            // rewritten), in an order that writes both edges of a shared
            // word; within a unit, blocks k with k % 5 == 2 are set, right
            // away or (`lagged`, as a step that lists a placement ahead)
            // once the next block is started.
            let mut expected = vec![true; 300];
            let units = [(37..150, true, false), (150..300, false, false), (0..37, true, true), (150..300, true, true)];
            for (units, rewrite, lagged) in units {
                let range = starts[units.start]..starts[units.end - 1] + block_words;
                let mut writer = flags.writer(range);
                let mut waiting = None;
                for k in units.filter(|_| rewrite) {
                    writer.clear(starts[k]);
                    if let Some(before) = waiting.take() {
                        writer.set(before);
                    }
                    if k % 5 == 2 {
                        match lagged {
                            true => waiting = Some(starts[k]),
                            false => writer.set(starts[k]),
                        }
                    }
                    expected[k] = k % 5 == 2;
                }
                if let Some(before) = waiting {
                    writer.set(before);
                }
            }
            let got: Vec<bool> = starts.iter().map(|&at| flags.get(at)).collect();
            assert_eq!(got, expected, "{block_words}-word blocks");
        }
    }

    /// Clearing one segment's flags leaves its neighbours' alone, and a
    /// marker sets exactly the blocks of the layouts it is given, for
    /// every block size.
    #[test]
    fn a_segment_is_cleared_and_marked_alone() {
        for block_words in 1..=25 {
            let mut flags = PlacementFlags::all_set(4 * SEGMENT_ELEMENTS, block_words);
            let segment = SEGMENT_ELEMENTS..2 * SEGMENT_ELEMENTS;
            flags.clear_segments(segment.clone());
            let marked = [0, 3, block_words, 5 * block_words + 1, SEGMENT_ELEMENTS - block_words];
            let mut marker = flags.marker(segment.start);
            let mut laid = Vec::new();
            for n in marked {
                laid.extend(marker.mark(n));
            }
            // Each block once, when its flag is first set.
            let mut blocks: Vec<usize> = Vec::new();
            for start in marked.map(|n| n - n % block_words) {
                if !blocks.contains(&start) {
                    blocks.push(start);
                }
            }
            let expected: Vec<_> = blocks.iter().map(|&s| s..s + block_words).collect();
            assert_eq!(laid, expected, "{block_words}-word blocks");
            // Block starts of every segment (each segment's blocks start
            // at its first element).
            for s in 0..4 {
                for start in (0..SEGMENT_ELEMENTS - block_words + 1).step_by(block_words) {
                    let expected = s != 1 || marked.iter().any(|&n| (start..start + block_words).contains(&n));
                    let at = s * SEGMENT_ELEMENTS + start;
                    assert_eq!(flags.get(at), expected, "{block_words}-word blocks, segment {s}, block at {start}");
                }
            }
        }
    }

    /// `next_set` (through `set_blocks`) finds the same blocks as asking
    /// each block in turn, for every block size, from units that start
    /// anywhere, over runs of clear words and flag numbers that are no
    /// block's (set too: flags start set).
    #[test]
    fn the_next_set_block_is_found_past_clear_flags() {
        for block_words in 1..=25 {
            let mut flags = PlacementFlags::all_set(8 * SEGMENT_ELEMENTS, block_words);
            flags.clear_segments(SEGMENT_ELEMENTS..7 * SEGMENT_ELEMENTS);
            let origin = SEGMENT_ELEMENTS;
            let mut marker = flags.marker(origin);
            let blocks = 6 * SEGMENT_ELEMENTS / block_words;
            // Sparse, then a dense run, then sparse again.
            let live = |k: usize| k % 97 == 5 || (blocks / 2..blocks / 2 + 40).contains(&k) || k == blocks - 1;
            for k in (0..blocks).filter(|&k| live(k)) {
                let _ = marker.mark(k * block_words);
            }
            for unit_start in [0, 1, 7, blocks / 3] {
                let unit_origin = origin + unit_start * block_words;
                let unit_blocks = blocks - unit_start;
                let found: Vec<usize> = flags.set_blocks(unit_origin, unit_blocks).collect();
                let expected: Vec<usize> =
                    (0..unit_blocks).filter(|&k| flags.get(unit_origin + k * block_words)).collect();
                assert_eq!(found, expected, "{block_words}-word blocks from block {unit_start}");
                assert_eq!(expected.len(), (unit_start..blocks).filter(|&k| live(k)).count());
            }
            // The set flags around the cleared segments are found too.
            assert_eq!(flags.next_set(0, 0, 3), Some(0));
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
            let by_master = flags.successors_changed_by_master(opponent);
            let mut rest = opponent;
            for changed in (0..3).map(|b| by_master >> b & 1 != 0) {
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

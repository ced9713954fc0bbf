//! Compressed shards: what each block stores, and its zstd frame.
//!
//! Owns the transform between value bytes and the bytes a compressed shard
//! stores, and writing compressed tables. The byte layout is `format`'s;
//! reading blocks back is `shard`'s.
//!
//! Some value bytes are cheap to recompute from the rules, so a compressed
//! shard does not store them and readers recompute them:
//! - game-over layouts (a master on its target square): value byte 0;
//! - wins in one ply (the mover can capture the opponent's master or step
//!   its master onto the opponent's temple): value byte 255. About half of
//!   all states.
//!
//! This writer packs blocks [`Packing::Dense`]: values as the bytes of the
//! stored states only, WDL as a loss and a draw bit plane per layout. On a
//! quarter of the 6-men table's blocks (`tools/wdl_encodings.rs`, bits
//! per state at zstd level 3 / 19): values 1.372 / 0.980 filled, 1.136 /
//! 0.909 dense, and dense is 1.5-2.6 times faster to compress; WDL 0.469 /
//! 0.167 as filled bytes, 0.185 / 0.127 as planes, and planes compress 3.3
//! (level 3) to 7 (level 19) times faster. Planes keep a layout's 30 card
//! states in one word, which bytes of the stored states only (0.367 /
//! 0.156) or bits of them (0.222 / 0.192) lose.
//!
//! [`Packing::Filled`] blocks (one byte per state, 255 in every recomputable
//! byte; written before 2026-11-22) are still read.
//!
//! Shards of value words (format version 2) are packed dense too: a byte
//! per stored state, the value byte of its word where a byte holds it,
//! and the few deep words after them ([`stored_words`]). On the deep
//! 4-men set's 2v2 that is 1.557 bits per state at level 19, against 1.746
//! for the stored words as they are and 1.855 for their low bytes then
//! their high bytes (1.834, 2.402 and 2.368 at level 3; docs/BENCHMARKS.md,
//! session 66). Their win/draw/loss-only shards are shards of bytes: each
//! word is given to the byte writer as a byte of the same class
//! ([`wdl_byte_of_word`]).

use crate::blockio::DirectAppender;
use crate::format::{BLOCK_BYTES, CompressedHeader, Content, FormatError, Frame, LEVELS, Packing, ShardHeader};
use crate::index::MaterialIndex;
use crate::rules::{ALL_CARD_STATES, CARD_STATES, MAX_PIECES_PER_SIDE, WinsInOne, masters_end_game};
use crate::shard::{Context, TableFiles};
use crate::store::{OutputDir, StoreError, check_room, compressed_shard_name};
use crate::value::{DRAW, DRAW_WORD, NO_VALUE, ValueWidth, narrow, widen, word_at};

use rayon::prelude::*;
use std::cell::RefCell;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Value byte of a win in one ply.
pub const WIN_IN_1: u8 = 255;
/// Value word of a win in one ply.
const WIN_IN_1_WORD: u16 = 0xFFFF;
/// Value byte of a win in three plies: what a WDL projection of value
/// words gives the byte writer for a win that is not in one ply.
const WIN_IN_3: u8 = 254;
/// Value byte a WDL projection stores for every loss.
pub const WDL_LOSS: u8 = 1;
/// What a filled block holds in place of a recomputable byte.
const FILLER: u8 = WIN_IN_1;
/// Bytes of a layout in dense WDL: a u32 loss mask and a u32 draw mask,
/// one bit per card state (30 of 32 used).
const PLANE_BYTES_PER_LAYOUT: usize = 8;
const _: () = assert!(CARD_STATES <= 32);
/// Blocks compressed at once per worker thread.
const BLOCKS_PER_THREAD: usize = 8;
/// Bytes a shard writer gathers before it writes them with O_DIRECT: few
/// writes, little memory next to a batch of blocks.
const STAGED_BYTES: usize = 1 << 20;
/// zstd level `onitb compress` uses unless told otherwise.
pub const DEFAULT_LEVEL: i32 = 19;

/// Set in a layout's [`recomputable`] entry if the layout is game over
/// (card states use bits 0..30).
const GAME_OVER: u32 = 1 << 31;

/// For each layout that `range` (offsets in the material's value area)
/// touches: the card states (bit k = state k) whose value the rules give,
/// wins in one ply, or [`GAME_OVER`] if all of them are holes. The slots
/// that take each opponent piece and that bring each mover piece onto the
/// temple are worked out once per placement, not per layout: per layout
/// this had been a fifth of the time of packing a block.
fn recomputable(index: &MaterialIndex, wins: &WinsInOne, range: &Range<u64>) -> Vec<u32> {
    let states = CARD_STATES as u64;
    let layouts = range.start / states..range.end.div_ceil(states);
    let (p, q) = (index.material.mover as usize, index.material.opponent as usize);
    let mut entries = Vec::with_capacity((layouts.end - layouts.start) as usize);
    index.for_each_placement_in(layouts, |mover, opponent, masters| {
        let (mut mover_squares, mut reaches) = ([0u8; MAX_PIECES_PER_SIDE], [0u32; MAX_PIECES_PER_SIDE]);
        let (mut opponent_squares, mut takes) = ([0u8; MAX_PIECES_PER_SIDE], [0u32; MAX_PIECES_PER_SIDE]);
        for (a, square) in squares_of(mover).enumerate() {
            (mover_squares[a], reaches[a]) = (square, wins.reaching_slots(mover, square));
        }
        for (b, square) in squares_of(opponent).enumerate() {
            (opponent_squares[b], takes[b]) = (square, wins.taking_slots(mover, square));
        }
        // Layout a * q + b: the mover's a-th piece and the opponent's b-th
        // are the masters.
        let whole = masters.start == 0 && masters.end as usize == p * q;
        for a in 0..p {
            for b in 0..q {
                if !whole && !masters.contains(&((a * q + b) as u32)) {
                    continue;
                }
                entries.push(if masters_end_game(mover_squares[a], opponent_squares[b]) {
                    GAME_OVER
                } else {
                    wins.states_of_slots(takes[b] | reaches[a])
                });
            }
        }
    });
    entries
}

/// The squares of `board`'s pieces, lowest first.
fn squares_of(board: u32) -> impl Iterator<Item = u8> {
    set_bits(board).map(|square| square as u8)
}

/// The layouts `range` touches, in order, each as (its place among them,
/// its card states inside `range`, the offset in `range` of the first).
fn segments(range: &Range<u64>) -> impl Iterator<Item = (usize, Range<usize>, usize)> + use<> {
    let (states, range) = (CARD_STATES as u64, range.clone());
    let first_layout = range.start / states;
    (first_layout..range.end.div_ceil(states)).map(move |layout| {
        let first_state = layout * states;
        let (from, to) = (range.start.max(first_state), range.end.min(first_state + states));
        let card_states = (from - first_state) as usize..(to - first_state) as usize;
        ((layout - first_layout) as usize, card_states, (from - range.start) as usize)
    })
}

/// The card states `card_states` as a mask (bit k = state k).
#[inline]
fn states_mask(card_states: &Range<usize>) -> u32 {
    ((1u64 << card_states.end) - (1u64 << card_states.start)) as u32
}

/// The set bits of `mask`, lowest first.
#[inline]
fn set_bits(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let k = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            k
        })
    })
}

/// Stored states of `range`: those whose value the rules do not give.
fn stored_states(range: &Range<u64>, entries: &[u32]) -> usize {
    segments(range)
        .map(|(j, card_states, _)| {
            let inside = states_mask(&card_states);
            if entries[j] & GAME_OVER != 0 { 0 } else { (inside & !entries[j]).count_ones() as usize }
        })
        .sum()
}

/// Layouts that `range` (value-area offsets) touches, whole or in part.
fn layouts_touched(range: &Range<u64>) -> usize {
    let states = CARD_STATES as u64;
    (range.end.div_ceil(states) - range.start / states) as usize
}

/// Most bytes the frame of a block covering `range` may decompress to.
pub fn stored_capacity(range: &Range<u64>, content: Content, packing: Packing) -> usize {
    match (packing, content) {
        (Packing::Filled, _) | (Packing::Dense, Content::Values) => (range.end - range.start) as usize,
        (Packing::Dense, Content::Wdl) => PLANE_BYTES_PER_LAYOUT * layouts_touched(range),
    }
}

/// A stored value (byte or word) that disagrees with the rules: the table
/// is wrong. `at` is a state number; `expected` is [`NO_VALUE`] for a
/// game-over state, [`WIN_IN_1`] for a win in one, None for any other.
fn disagreement(index: &MaterialIndex, at: u64, stored: u16, expected: Option<u8>) -> FormatError {
    let problem = match expected {
        Some(NO_VALUE) => "a game-over position holds a value".to_string(),
        Some(_) => "a position with a winning move is not stored as a win in 1 ply".to_string(),
        None => "a position without a winning move is stored as a win in 1 ply, or without value".to_string(),
    };
    FormatError::WrongValue {
        material: index.material,
        layout: at / CARD_STATES as u64,
        card_state: (at % CARD_STATES as u64) as u8,
        stored,
        problem,
    }
}

/// Bytes of a layout's window: its 30 value bytes and 2 more, a whole
/// vector.
const WINDOW_BYTES: usize = 32;
const _: () = assert!(CARD_STATES <= WINDOW_BYTES);

/// The value bytes of the layout whose `card_states` lie in `values` from
/// `first` on, as a window in which byte k is state k's (the states not in
/// `card_states`, and the 2 bytes after the layout, are any bytes): where
/// `values` holds the whole window, read in place; a copy of the layout's
/// bytes into a padded window had cost a third of the time of packing a
/// block (the copy's stores cannot be forwarded to the vector load that
/// reads them).
#[inline]
fn window(values: &[u8], first: usize, card_states: &Range<usize>) -> [u8; WINDOW_BYTES] {
    if card_states.start == 0
        && let Some(window) = values.get(first..first + WINDOW_BYTES)
    {
        return window.try_into().expect("a window");
    }
    let mut padded = [WIN_IN_1; WINDOW_BYTES];
    padded[card_states.clone()].copy_from_slice(&values[first..first + card_states.len()]);
    padded
}

/// Writes the bytes of `window` at the set bits of `keep` (bit k: byte
/// k), in order, to the start of `out`, and returns how many: on x86_64
/// a byte shuffle per 8 bytes, each writing 8 bytes (`out` must have
/// room for 8 after the last byte kept). A byte at a time, in a loop of as
/// many rounds as bytes kept, the loop's exit was mispredicted most
/// layouts.
#[inline]
fn compact(window: &[u8; WINDOW_BYTES], keep: u32, out: &mut [u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    // SAFETY: as in `Classes::of`: this build assumes SSSE3.
    let kept = unsafe { compact_vector(window, keep, out) };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "ssse3")))]
    let kept = compact_scalar(window, keep, out);
    #[cfg(debug_assertions)]
    {
        let mut expected = [0u8; WINDOW_BYTES];
        let count = compact_scalar(window, keep, &mut expected);
        debug_assert_eq!((kept, &out[..kept]), (count, &expected[..count]), "the shuffles agree with the definition");
    }
    kept
}

/// [`compact`], a byte at a time: the definition.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "ssse3", not(debug_assertions)), allow(dead_code))]
fn compact_scalar(window: &[u8; WINDOW_BYTES], keep: u32, out: &mut [u8]) -> usize {
    let mut next = 0;
    for k in set_bits(keep) {
        out[next] = window[k];
        next += 1;
    }
    next
}

#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
#[target_feature(enable = "ssse3")]
#[inline]
fn compact_vector(window: &[u8; WINDOW_BYTES], keep: u32, out: &mut [u8]) -> usize {
    use std::arch::x86_64::*;
    let mut next = 0;
    for (chunk, bytes) in window.chunks_exact(8).enumerate() {
        let mask = (keep >> (8 * chunk) & 0xff) as usize;
        if mask == 0 {
            continue;
        }
        let bytes = _mm_cvtsi64_si128(i64::from_le_bytes(bytes.try_into().expect("8 bytes")));
        let gathered = _mm_shuffle_epi8(bytes, _mm_cvtsi64_si128(MASK_TABLES.gather[mask] as i64));
        out[next..next + 8].copy_from_slice(&_mm_cvtsi128_si64(gathered).to_le_bytes());
        next += mask.count_ones() as usize;
    }
    next
}

/// Puts the first bytes of `stored` at the set bits of `keep` (bit k:
/// state k) of a whole layout's `states`, in order, and [`WIN_IN_1`] at
/// the others; returns how many bytes it took: [`compact`] undone. On
/// x86_64, where `stored` holds a [`WINDOW_BYTES`] more, a byte shuffle
/// per 8 states.
#[inline]
fn expand(stored: &[u8], keep: u32, states: &mut [u8; CARD_STATES]) -> usize {
    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    if stored.len() >= WINDOW_BYTES {
        // SAFETY: as in `Classes::of`: this build assumes SSSE3.
        let taken = unsafe { expand_vector(stored, keep, states) };
        #[cfg(debug_assertions)]
        {
            let mut expected = [0u8; CARD_STATES];
            debug_assert_eq!(
                (expand_scalar(stored, keep, &mut expected), expected),
                (taken, *states),
                "the shuffles agree with the definition"
            );
        }
        return taken;
    }
    expand_scalar(stored, keep, states)
}

/// [`expand`], a byte at a time: the definition.
fn expand_scalar(stored: &[u8], keep: u32, states: &mut [u8; CARD_STATES]) -> usize {
    states.fill(WIN_IN_1);
    let mut next = 0;
    for k in set_bits(keep) {
        states[k] = stored[next];
        next += 1;
    }
    next
}

#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
#[target_feature(enable = "ssse3")]
#[inline]
fn expand_vector(stored: &[u8], keep: u32, states: &mut [u8; CARD_STATES]) -> usize {
    use std::arch::x86_64::*;
    let mut next = 0;
    for (chunk, out) in states.chunks_mut(8).enumerate() {
        let mask = (keep >> (8 * chunk) & 0xff) as usize;
        let bytes = _mm_cvtsi64_si128(i64::from_le_bytes(stored[next..next + 8].try_into().expect("8 bytes")));
        let spread = _mm_shuffle_epi8(bytes, _mm_cvtsi64_si128(MASK_TABLES.spread[mask] as i64));
        // The shuffle's zero bytes (the states not kept) become wins in one.
        let filled = _mm_cvtsi128_si64(spread) as u64 | !MASK_TABLES.bytes[mask];
        out.copy_from_slice(&filled.to_le_bytes()[..out.len()]);
        next += mask.count_ones() as usize;
    }
    next
}

/// Per 8-bit mask of a layout's bytes (8 states of a chunk), the byte
/// shuffles and masks of [`compact`] and [`expand`], as 8 bytes each.
#[cfg_attr(not(all(target_arch = "x86_64", target_feature = "ssse3")), allow(dead_code))]
struct MaskTables {
    /// Gathers the bytes at the set bits to the front: byte j is where the
    /// j-th set bit is.
    gather: [u64; 256],
    /// Spreads the first bytes over the set bits: byte i is how many bits
    /// are set below bit i, or 0x80 (a zero byte) where bit i is not set.
    spread: [u64; 256],
    /// 0xff in the bytes of the set bits.
    bytes: [u64; 256],
}

#[cfg_attr(not(all(target_arch = "x86_64", target_feature = "ssse3")), allow(dead_code))]
const MASK_TABLES: MaskTables = {
    let mut tables = MaskTables { gather: [0; 256], spread: [0; 256], bytes: [0; 256] };
    let mut mask = 0;
    while mask < 256 {
        let (mut bit, mut below) = (0, 0u64);
        while bit < 8 {
            if mask >> bit & 1 != 0 {
                tables.gather[mask] |= (bit as u64) << (8 * below);
                tables.spread[mask] |= below << (8 * bit);
                tables.bytes[mask] |= 0xff << (8 * bit);
                below += 1;
            } else {
                tables.spread[mask] |= 0x80 << (8 * bit);
            }
            bit += 1;
        }
        mask += 1;
    }
    tables
};
const _: () = assert!(WIN_IN_1 == 0xff, "the not kept bytes are filled with ones");

/// What a layout's values are, one bit per card state (bit k = state k of
/// the layout, for the states the values cover).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Classes {
    win_in_1: u32,
    no_value: u32,
    loss: u32,
    draw: u32,
}

impl Classes {
    /// Classes of a layout's [`window`]: bit k is state k's (bits 30 and
    /// 31 are of the bytes after the layout: callers mask them off). On
    /// x86_64 a vector comparison and byte mask per class.
    #[inline]
    fn of(window: &[u8; WINDOW_BYTES]) -> Classes {
        #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
        // SAFETY: the only requirement of a `target_feature` function is
        // that the CPU has the feature, and this build assumes it for every
        // function (the `cfg` above: `.cargo/config.toml` builds for
        // x86-64-v3, which has AVX2, and `main` checks the CPU has it).
        let classes = unsafe { Classes::of_vector(window) };
        #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
        let classes = Classes::of_scalar(window);
        debug_assert_eq!(classes, Classes::of_scalar(window), "the vector classes agree with the scalar ones");
        classes
    }

    /// [`Classes::of`], a byte at a time: the definition.
    fn of_scalar(window: &[u8; WINDOW_BYTES]) -> Classes {
        let mut classes = Classes::default();
        for (k, &byte) in window.iter().enumerate() {
            classes.win_in_1 |= u32::from(byte == WIN_IN_1) << k;
            classes.no_value |= u32::from(byte == NO_VALUE) << k;
            classes.loss |= u32::from(byte.wrapping_sub(1) < DRAW - 1) << k;
            classes.draw |= u32::from(byte == DRAW) << k;
        }
        classes
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    #[target_feature(enable = "avx2")]
    #[inline]
    fn of_vector(window: &[u8; WINDOW_BYTES]) -> Classes {
        use std::arch::x86_64::*;
        // Four 8-byte reads (a direct load was no faster).
        let word = |i: usize| i64::from_le_bytes(window[i..i + 8].try_into().expect("8 bytes"));
        let bytes = _mm256_set_epi64x(word(24), word(16), word(8), word(0));
        let mask = |equal: __m256i| _mm256_movemask_epi8(equal) as u32;
        let holding = |byte: u8| mask(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi8(byte as i8)));
        // A loss is 1..DRAW: byte - 1 at most DRAW - 2, unsigned, which is
        // where the unsigned minimum with DRAW - 2 leaves it as it was.
        let less_one = _mm256_sub_epi8(bytes, _mm256_set1_epi8(1));
        let at_most = _mm256_min_epu8(less_one, _mm256_set1_epi8((DRAW - 2) as i8));
        Classes {
            win_in_1: holding(WIN_IN_1),
            no_value: holding(NO_VALUE),
            loss: mask(_mm256_cmpeq_epi8(at_most, less_one)),
            draw: holding(DRAW),
        }
    }

    /// Classes of `words` (little-endian value words), the layout's card
    /// states from `first_state` on.
    #[inline]
    fn of_words(words: &[u8], first_state: usize) -> Classes {
        let mut classes = Classes::default();
        for (i, word) in words.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])).enumerate() {
            let k = first_state + i;
            classes.win_in_1 |= u32::from(word == WIN_IN_1_WORD) << k;
            classes.no_value |= u32::from(word == 0) << k;
            classes.loss |= u32::from(word.wrapping_sub(1) < DRAW_WORD - 1) << k;
            classes.draw |= u32::from(word == DRAW_WORD) << k;
        }
        classes
    }

    /// The card states among `inside` whose value the rules give (by the
    /// layout's [`recomputable`] entry), or the first one (lowest k) whose
    /// value disagrees with the rules and what [`disagreement`] is to say
    /// was expected there.
    #[inline]
    fn fixed(&self, entry: u32, inside: u32) -> Result<u32, (usize, Option<u8>)> {
        let (fixed, wrong) = if entry & GAME_OVER != 0 {
            (inside, inside & !self.no_value)
        } else {
            let fixed = entry & inside;
            (fixed, (fixed & !self.win_in_1) | (inside & !fixed & (self.win_in_1 | self.no_value)))
        };
        if wrong == 0 {
            return Ok(fixed);
        }
        let k = wrong.trailing_zeros() as usize;
        let expected = if entry & GAME_OVER != 0 { Some(NO_VALUE) } else { (fixed >> k & 1 != 0).then_some(WIN_IN_1) };
        Err((k, expected))
    }
}

/// The bytes a compressed shard stores for one block of values: checks
/// that the recomputable bytes are what the rules say, projects to WDL if
/// asked, and packs. Works a layout at a time on masks of its card states:
/// this runs for every block a table is compressed with, and per state it
/// was as costly as zstd at level 3.
pub fn stored_bytes(
    index: &MaterialIndex,
    context: &Context,
    range: Range<u64>,
    values: &[u8],
    content: Content,
    packing: Packing,
) -> Result<Vec<u8>, FormatError> {
    assert_eq!(values.len() as u64, range.end - range.start, "one value per state of the range");
    let entries = recomputable(index, &context.wins, &range);
    let capacity = stored_capacity(&range, content, packing);
    // Room for `compact`'s last 8-byte write, cut off below.
    let mut out = vec![0u8; capacity + 8];
    let mut next = 0;
    let (mut losses, mut draws) = match (packing, content) {
        (Packing::Dense, Content::Wdl) => (vec![0u32; entries.len()], vec![0u32; entries.len()]),
        _ => (Vec::new(), Vec::new()),
    };
    for (j, card_states, first) in segments(&range) {
        let (entry, inside) = (entries[j], states_mask(&card_states));
        let bytes = &values[first..first + card_states.len()];
        let window = window(values, first, &card_states);
        let classes = Classes::of(&window);
        let fixed = classes.fixed(entry, inside).map_err(|(k, expected)| {
            let at = (first + k - card_states.start) as u64;
            disagreement(index, range.start + at, bytes[k - card_states.start].into(), expected)
        })?;
        match (packing, content) {
            (Packing::Filled, _) => {
                let states = &mut out[first..first + bytes.len()];
                for ((i, &byte), stored) in bytes.iter().enumerate().zip(states) {
                    let k = card_states.start + i;
                    *stored = match content {
                        _ if fixed >> k & 1 != 0 => FILLER,
                        Content::Values => byte,
                        Content::Wdl => wdl_byte(byte),
                    };
                }
            }
            (Packing::Dense, Content::Values) => next += compact(&window, inside & !fixed, &mut out[next..]),
            (Packing::Dense, Content::Wdl) => {
                losses[j] = classes.loss & inside & !fixed;
                draws[j] = classes.draw & inside & !fixed;
            }
        }
    }
    match (packing, content) {
        (Packing::Dense, Content::Values) => out.truncate(next),
        (Packing::Dense, Content::Wdl) => {
            for (mask, at) in losses.iter().chain(&draws).zip(out.chunks_exact_mut(4)) {
                at.copy_from_slice(&mask.to_le_bytes());
            }
            out.truncate(capacity);
        }
        (Packing::Filled, _) => out.truncate(capacity),
    }
    Ok(out)
}

/// The value bytes of one block (for WDL content: 1, 128 or 255) from
/// what its frame decompressed to: unpacks, and puts the recomputable
/// values back. Fails if `stored` has the wrong length for the block.
pub fn unpack(
    index: &MaterialIndex,
    context: &Context,
    range: Range<u64>,
    stored: &[u8],
    content: Content,
    packing: Packing,
    block: usize,
) -> Result<Vec<u8>, FormatError> {
    let entries = recomputable(index, &context.wins, &range);
    let expected = match (packing, content) {
        (Packing::Dense, Content::Values) => stored_states(&range, &entries),
        _ => stored_capacity(&range, content, packing),
    };
    if stored.len() != expected {
        let problem = format!("{} bytes instead of {expected}", stored.len());
        return Err(FormatError::Decompress { block, problem });
    }
    let mut out = vec![0u8; (range.end - range.start) as usize];
    // One loop per packing: this runs for every block a probe or a reader
    // decompresses, so the packing is not decided per state.
    match (packing, content) {
        (Packing::Filled, _) => {
            for (j, card_states, first) in segments(&range) {
                let (entry, inside) = (entries[j], states_mask(&card_states));
                if entry & GAME_OVER != 0 {
                    continue; // out is already NO_VALUE there
                }
                let states = &mut out[first..first + card_states.len()];
                states.copy_from_slice(&stored[first..first + states.len()]);
                for k in set_bits(entry & inside) {
                    states[k - card_states.start] = WIN_IN_1;
                }
            }
        }
        (Packing::Dense, Content::Values) => {
            let mut next = 0;
            for (j, card_states, first) in segments(&range) {
                let (entry, inside) = (entries[j], states_mask(&card_states));
                if entry & GAME_OVER != 0 {
                    continue; // out is already NO_VALUE there
                }
                let states = &mut out[first..first + card_states.len()];
                if entry & inside == 0 {
                    // No win in one: the layout's bytes are stored in a row.
                    states.copy_from_slice(&stored[next..next + states.len()]);
                    next += states.len();
                    continue;
                }
                if let Ok(whole) = <&mut [u8; CARD_STATES]>::try_from(&mut *states) {
                    next += expand(&stored[next..], !entry & ALL_CARD_STATES, whole);
                    continue;
                }
                states.fill(WIN_IN_1);
                for k in set_bits(inside & !entry) {
                    states[k - card_states.start] = stored[next];
                    next += 1;
                }
            }
            debug_assert_eq!(next, stored.len());
        }
        (Packing::Dense, Content::Wdl) => {
            let mask = |plane: usize, j: usize| {
                let at = (plane * entries.len() + j) * 4;
                u32::from_le_bytes(stored[at..at + 4].try_into().expect("4 bytes"))
            };
            for (j, card_states, first) in segments(&range) {
                let (entry, inside) = (entries[j], states_mask(&card_states));
                if entry & GAME_OVER != 0 {
                    continue;
                }
                let (losses, draws) = (mask(0, j) & inside & !entry, mask(1, j) & inside & !entry);
                if losses & draws != 0 {
                    let at = range.start + (first + losses.trailing_zeros() as usize - card_states.start) as u64;
                    let problem = format!("state {at} is marked both lost and drawn");
                    return Err(FormatError::Decompress { block, problem });
                }
                let states = &mut out[first..first + card_states.len()];
                states.fill(WIN_IN_1);
                for (plane, byte) in [(losses, WDL_LOSS), (draws, DRAW)] {
                    for k in set_bits(plane) {
                        states[k - card_states.start] = byte;
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The byte a WDL projection stores for a value byte.
pub fn wdl_byte(value: u8) -> u8 {
    match value {
        NO_VALUE => NO_VALUE,
        1..DRAW => WDL_LOSS,
        DRAW => DRAW,
        _ => WIN_IN_1,
    }
}

/// A value byte of the same class as a value word (no value, loss, draw,
/// win in one, other win): what a WDL shard of a table of words is
/// written from, by the byte writer, which checks wins in one as it does
/// for bytes.
pub fn wdl_byte_of_word(word: u16) -> u8 {
    match word {
        0 => NO_VALUE,
        1..DRAW_WORD => WDL_LOSS,
        DRAW_WORD => DRAW,
        WIN_IN_1_WORD => WIN_IN_1,
        _ => WIN_IN_3,
    }
}

/// The states (numbers, in the material's value area) of a range of value
/// words given as byte offsets.
fn word_states(range: &Range<u64>) -> Range<u64> {
    debug_assert!(range.start.is_multiple_of(2) && range.end.is_multiple_of(2), "blocks hold whole words");
    range.start / 2..range.end / 2
}

/// What [`stored_words`] stores in the byte plane for a word no value
/// byte holds: 0, which no stored state's byte is (it is no value, which
/// only recomputed states have).
const DEEP_WORD: u8 = NO_VALUE;

/// [`stored_bytes`] of a block of value words (values, densely packed:
/// the only way words are stored): one byte per stored state, the value
/// byte of its word if a byte holds it ([`narrow`]: every value but the
/// deep ones), else [`DEEP_WORD`]; then the words of those deep states, in
/// order. So a block compresses about as a block of bytes would (the deep
/// values are few), and never to more than three bytes a state
/// ([`stored_word_capacity`]). `range` and `values` are of the value
/// area's bytes, two per state.
pub fn stored_words(
    index: &MaterialIndex,
    context: &Context,
    range: Range<u64>,
    values: &[u8],
) -> Result<Vec<u8>, FormatError> {
    assert_eq!(values.len() as u64, range.end - range.start, "two bytes per state of the range");
    let states = word_states(&range);
    let entries = recomputable(index, &context.wins, &states);
    let mut out = vec![0u8; stored_states(&states, &entries)];
    let mut deep = Vec::new();
    let mut next = 0;
    for (j, card_states, first) in segments(&states) {
        let words = &values[2 * first..2 * (first + card_states.len())];
        let inside = states_mask(&card_states);
        let fixed =
            Classes::of_words(words, card_states.start).fixed(entries[j], inside).map_err(|(k, expected)| {
                let i = k - card_states.start;
                disagreement(index, states.start + (first + i) as u64, word_at(words, i), expected)
            })?;
        for k in set_bits(inside & !fixed) {
            let word = word_at(words, k - card_states.start);
            // Not 0 (no value) nor 65535 (won in one): checked above, so
            // its byte is never DEEP_WORD.
            out[next] = narrow(word).unwrap_or_else(|| {
                deep.extend_from_slice(&word.to_le_bytes());
                DEEP_WORD
            });
            next += 1;
        }
    }
    debug_assert_eq!(next, out.len());
    out.extend_from_slice(&deep);
    Ok(out)
}

/// Most bytes the frame of a block of value words covering `range` (bytes
/// of the value area) may decompress to: three a state, each a deep one.
fn stored_word_capacity(range: &Range<u64>) -> usize {
    3 * (range.end - range.start) as usize / 2
}

/// Most bytes the frame of block `range` of a compressed shard with
/// `header` may decompress to, whatever its width.
pub fn block_capacity(header: &CompressedHeader, range: &Range<u64>) -> usize {
    match header.shard.width {
        ValueWidth::Byte => stored_capacity(range, header.content, header.packing),
        ValueWidth::Word => stored_word_capacity(range),
    }
}

/// The value area's bytes of block `range` of a compressed shard with
/// `header` from its stored bytes: [`unpack`] or [`unpack_words`] by the
/// header's width.
pub fn unpack_block(
    index: &MaterialIndex,
    context: &Context,
    header: &CompressedHeader,
    range: Range<u64>,
    stored: &[u8],
    block: usize,
) -> Result<Vec<u8>, FormatError> {
    match header.shard.width {
        ValueWidth::Byte => unpack(index, context, range, stored, header.content, header.packing, block),
        // The header allows words only as values, densely packed.
        ValueWidth::Word => unpack_words(index, context, range, stored, block),
    }
}

/// [`unpack`] of a block of value words ([`stored_words`]): the value
/// area's bytes of `range`, two per state.
fn unpack_words(
    index: &MaterialIndex,
    context: &Context,
    range: Range<u64>,
    stored: &[u8],
    block: usize,
) -> Result<Vec<u8>, FormatError> {
    let states = word_states(&range);
    let entries = recomputable(index, &context.wins, &states);
    let count = stored_states(&states, &entries);
    let wrong_length = |expected: usize| {
        let problem = format!("{} bytes instead of {expected}", stored.len());
        FormatError::Decompress { block, problem }
    };
    let Some((plane, deep)) = stored.split_at_checked(count) else { return Err(wrong_length(count)) };
    let deep_words = plane.iter().filter(|&&byte| byte == DEEP_WORD).count();
    if deep.len() != 2 * deep_words {
        return Err(wrong_length(count + 2 * deep_words));
    }
    let mut out = vec![0u8; (range.end - range.start) as usize];
    let (mut next, mut next_deep) = (0, 0);
    for (j, card_states, first) in segments(&states) {
        let entry = entries[j];
        if entry & GAME_OVER != 0 {
            continue; // out is already no value (0) there
        }
        let words = &mut out[2 * first..2 * (first + card_states.len())];
        // Most layouts have no win in one and no deep state: their bytes
        // widen in a row, with no test per state.
        let bytes = plane.get(next..next + card_states.len());
        if let Some(bytes) = bytes.filter(|b| entry & states_mask(&card_states) == 0 && !b.contains(&DEEP_WORD)) {
            for (word, &byte) in words.chunks_exact_mut(2).zip(bytes) {
                word.copy_from_slice(&widen(byte).to_le_bytes());
            }
            next += bytes.len();
            continue;
        }
        for (i, word) in words.chunks_exact_mut(2).enumerate() {
            let value = if entry >> (card_states.start + i) & 1 != 0 {
                WIN_IN_1_WORD.to_le_bytes()
            } else if plane[next] == DEEP_WORD {
                next += 1;
                next_deep += 2;
                [deep[next_deep - 2], deep[next_deep - 1]]
            } else {
                next += 1;
                widen(plane[next - 1]).to_le_bytes()
            };
            word.copy_from_slice(&value);
        }
    }
    debug_assert_eq!((next, next_deep), (count, deep.len()));
    Ok(out)
}

thread_local! {
    /// This thread's zstd compressor and its level, kept from frame to
    /// frame. `zstd::bulk::compress` makes one per call, and at level 3 its
    /// 1.3 MB of tables were fresh memory for every 4 MiB block
    /// (docs/BENCHMARKS.md, session 56). The frames are the same bytes: a
    /// kept context starts every frame afresh with the same parameters.
    static COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> = const { RefCell::new(None) };
}

/// One zstd frame and its seek-table entry (offset filled in by the writer).
pub fn compress_frame(stored: &[u8], level: i32) -> Result<(Vec<u8>, Frame), FormatError> {
    let frame = COMPRESSOR
        .with_borrow_mut(|kept| {
            if kept.as_ref().is_none_or(|(at, _)| *at != level) {
                *kept = Some((level, zstd::bulk::Compressor::new(level)?));
            }
            kept.as_mut().expect("made above").1.compress(stored)
        })
        .map_err(|e| FormatError::Unrepresentable(e.to_string()))?;
    // Frames of bytes always fit (a test checks zstd's bound); of words,
    // whose stored bytes may be longer than the block, they could not.
    if frame.len() > crate::format::MAX_FRAME_BYTES as usize {
        let problem = format!("a block's frame of {} bytes, longer than the format allows", frame.len());
        return Err(FormatError::Unrepresentable(problem));
    }
    let entry = Frame {
        offset: 0,
        len: frame.len() as u32,
        crc: crc32fast::hash(&frame),
        content_crc: crc32fast::hash(stored),
    };
    Ok((frame, entry))
}

/// Decompresses one frame whose bytes already passed their checksum into at
/// most `capacity` bytes, and checks the result's checksum (its length is
/// [`unpack`]'s to check).
pub fn decompress_frame(frame: &[u8], capacity: usize, content_crc: u32, block: usize) -> Result<Vec<u8>, FormatError> {
    let bytes = zstd::bulk::decompress(frame, capacity)
        .map_err(|e| FormatError::Decompress { block, problem: e.to_string() })?;
    let computed = crc32fast::hash(&bytes);
    if computed != content_crc {
        return Err(FormatError::ContentCrc { block, stored: content_crc, computed });
    }
    Ok(bytes)
}

/// Sizes of one compressed shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardSizes {
    pub material: crate::index::Material,
    /// Positions with a value (game-over holes excluded).
    pub states: u64,
    /// Value bytes in (game-over holes included).
    pub value_bytes: u64,
    /// Bytes of the compressed file, header included.
    pub file_bytes: u64,
    /// The width of the values compressed (a WDL shard's are bytes).
    pub width: ValueWidth,
}

/// Refuses a zstd level that `format` does not allow or zstd lacks.
pub fn check_level(level: i32, path: &Path) -> Result<(), StoreError> {
    if !LEVELS.contains(&level) || level > *zstd::compression_level_range().end() {
        return Err(StoreError::Format { path: path.to_path_buf(), cause: FormatError::Level(level) });
    }
    Ok(())
}

/// Compresses the table in `input` (raw or compressed) into a new directory
/// `output` of compressed shards, checking every block read and every
/// recomputable value. `report` is called after each shard.
pub fn compress_table(
    input: &Path,
    output: &Path,
    level: i32,
    content: Content,
    report: &(dyn Fn(ShardSizes) + Sync),
) -> Result<Vec<ShardSizes>, StoreError> {
    check_level(level, output)?;
    let table = TableFiles::open(input)?;
    let out = OutputDir::prepare(output)?;
    let context = Context::new(table.rules, table.max_per_side);
    let mut sizes = Vec::with_capacity(table.shards.len());
    for shard in &table.shards {
        if shard.content() != Content::Values {
            return Err(StoreError::Format { path: shard.path().to_path_buf(), cause: FormatError::WdlOnly });
        }
        // A WDL shard holds bytes whatever the input's width: its words
        // go to the writer as bytes of the same class.
        let words_to_wdl = shard.header().width == ValueWidth::Word && content == Content::Wdl;
        let width = if words_to_wdl { ValueWidth::Byte } else { shard.header().width };
        let path = out.path_for(&compressed_shard_name(shard.material()));
        let header = ShardHeader { block_crcs: Vec::new(), width, ..shard.header().clone() };
        let mut writer =
            CompressedShardWriter::create(&path, header, &context, level, content)?.values_from(shard.path());
        // Read (decompress, unpack) a batch of blocks in parallel, as the
        // writer compresses its batches: for a compressed input at a fast
        // level, reading is as much work as writing.
        let batch_blocks = BLOCKS_PER_THREAD * rayon::current_num_threads();
        for first in (0..shard.block_count()).step_by(batch_blocks) {
            let batch = first..(first + batch_blocks).min(shard.block_count());
            let values: Vec<Vec<u8>> =
                batch.into_par_iter().map(|block| shard.read_values(block, &context)).collect::<Result<_, _>>()?;
            for block_values in &values {
                if words_to_wdl {
                    let bytes: Vec<u8> = block_values
                        .chunks_exact(2)
                        .map(|w| wdl_byte_of_word(u16::from_le_bytes([w[0], w[1]])))
                        .collect();
                    writer.write_values(&bytes)?;
                } else {
                    writer.write_values(block_values)?;
                }
            }
        }
        let written = writer.finish()?;
        report(written);
        sizes.push(written);
    }
    out.finish()?;
    Ok(sizes)
}

/// Writes a compressed shard from a material's value bytes, given in layout
/// order in chunks of any size (from a raw shard, or straight from the
/// solver): cuts them into blocks, compresses a batch of blocks at a time in
/// parallel (checking recomputable values), writes the frames, and on
/// `finish` the header with the seek table, then syncs. Holds at most a
/// batch of blocks and their frames.
pub struct CompressedShardWriter<'c> {
    path: PathBuf,
    /// Named in errors about the values themselves (a recomputable value
    /// that disagrees with the rules): the input shard, when compressing one.
    source: PathBuf,
    /// The file, written with O_DIRECT (its header last, over zeros).
    out: DirectAppender,
    /// The shard's header, without block checksums (frames carry theirs).
    header: ShardHeader,
    context: &'c Context,
    index: std::sync::Arc<MaterialIndex>,
    level: i32,
    content: Content,
    /// Always [`Packing::Dense`] except in tests of reading filled shards.
    packing: Packing,
    /// Full blocks not compressed yet, and the block being filled.
    pending: Vec<Vec<u8>>,
    current: Vec<u8>,
    /// Full blocks gathered before they are compressed together.
    batch_blocks: usize,
    /// Blocks compressed and written so far, and where the next frame goes.
    frames: Vec<Frame>,
    offset: u64,
    written: u64,
    states: u64,
}

impl<'c> CompressedShardWriter<'c> {
    /// Creates `path` (which must not exist), with room for the header.
    /// Refuses WDL content for a header of value words (WDL shards hold
    /// bytes: [`wdl_byte_of_word`]), creating nothing.
    pub fn create(
        path: &Path,
        header: ShardHeader,
        context: &'c Context,
        level: i32,
        content: Content,
    ) -> Result<Self, StoreError> {
        check_level(level, path)?;
        if header.width == ValueWidth::Word && content == Content::Wdl {
            let cause = FormatError::WordContent(crate::format::content_code(content, Packing::Dense));
            return Err(StoreError::Format { path: path.to_path_buf(), cause });
        }
        let header_len = crate::format::compressed_header_len(header.block_count());
        let mut out =
            DirectAppender::create_new(path, STAGED_BYTES, header_len).map_err(write_error("create shard", path))?;
        out.append_zeros(header_len).map_err(write_error("write shard", path))?;
        Ok(CompressedShardWriter {
            path: path.to_path_buf(),
            source: path.to_path_buf(),
            out,
            index: context.index(header.material),
            header,
            context,
            level,
            content,
            packing: Packing::Dense,
            pending: Vec::new(),
            current: Vec::with_capacity(BLOCK_BYTES as usize),
            batch_blocks: (BLOCKS_PER_THREAD * rayon::current_num_threads()).max(1),
            frames: Vec::new(),
            offset: header_len as u64,
            written: 0,
            states: 0,
        })
    }

    /// Compresses `blocks` blocks at a time (at least one) instead of
    /// [`BLOCKS_PER_THREAD`] per thread: the blocks waiting are most of
    /// what a writer holds, 4 MiB each.
    pub fn batch_blocks(mut self, blocks: usize) -> Self {
        self.batch_blocks = blocks.max(1);
        self
    }

    /// Names `source` instead of the output in errors about the values.
    pub fn values_from(mut self, source: &Path) -> Self {
        self.source = source.to_path_buf();
        self
    }

    /// Appends the next value bytes. The whole blocks of a chunk that
    /// holds at least one per thread are compressed where they lie, with
    /// the blocks waiting, instead of being copied into blocks of their
    /// own first: the 51 GB of the 8-men table were copied on one thread
    /// while the other waited. The bytes around them are gathered.
    pub fn write_values(&mut self, values: &[u8]) -> Result<(), StoreError> {
        check_room(&self.path, self.written, values.len(), self.header.values_len())?;
        let mut rest = values;
        while !rest.is_empty() {
            let block = self.frames.len() + self.pending.len();
            if self.current.is_empty() {
                let (whole, after) = self.whole_blocks(block, rest);
                if whole.len() >= rayon::current_num_threads() {
                    self.compress_with_pending(&whole)?;
                    self.written += (rest.len() - after.len()) as u64;
                    rest = after;
                    continue;
                }
            }
            let block_len = (self.header.block_range(block).end - self.header.block_range(block).start) as usize;
            let take = rest.len().min(block_len - self.current.len());
            self.current.extend_from_slice(&rest[..take]);
            self.written += take as u64;
            rest = &rest[take..];
            if self.current.len() == block_len {
                self.pending.push(std::mem::replace(&mut self.current, Vec::with_capacity(BLOCK_BYTES as usize)));
                if self.pending.len() >= self.batch_blocks {
                    self.flush()?;
                }
            }
        }
        Ok(())
    }

    /// `values` cut into the whole blocks from block `first` on that it
    /// holds, and the bytes after them.
    fn whole_blocks<'v>(&self, first: usize, mut values: &'v [u8]) -> (Vec<&'v [u8]>, &'v [u8]) {
        let mut blocks = Vec::new();
        while first + blocks.len() < self.header.block_count() {
            let range = self.header.block_range(first + blocks.len());
            let Some((block, after)) = values.split_at_checked((range.end - range.start) as usize) else { break };
            blocks.push(block);
            values = after;
        }
        (blocks, values)
    }

    /// Compresses the pending blocks, then `whole` (the blocks after
    /// them, where they lie), and writes their frames.
    fn compress_with_pending(&mut self, whole: &[&[u8]]) -> Result<(), StoreError> {
        let pending = std::mem::take(&mut self.pending);
        let blocks: Vec<&[u8]> = pending.iter().map(Vec::as_slice).chain(whole.iter().copied()).collect();
        for batch in blocks.chunks(self.batch_blocks) {
            self.compress_blocks(batch)?;
        }
        self.pending = pending;
        self.pending.clear();
        Ok(())
    }

    /// Compresses the pending blocks in parallel and writes their frames.
    fn flush(&mut self) -> Result<(), StoreError> {
        self.compress_with_pending(&[])
    }

    /// Compresses `blocks`, the next blocks of the shard, in parallel and
    /// writes their frames.
    fn compress_blocks(&mut self, blocks: &[&[u8]]) -> Result<(), StoreError> {
        let first = self.frames.len();
        let (index, context, header) = (&self.index, self.context, &self.header);
        let (level, content, packing) = (self.level, self.content, self.packing);
        let width = header.width;
        self.states += blocks.par_iter().map(|v| states_with_value(v, width)).sum::<u64>();
        let compressed: Vec<(Vec<u8>, Frame)> = blocks
            .par_iter()
            .enumerate()
            .map(|(i, values)| {
                let range = header.block_range(first + i);
                let stored = match width {
                    ValueWidth::Byte => stored_bytes(index, context, range, values, content, packing)?,
                    ValueWidth::Word => stored_words(index, context, range, values)?,
                };
                compress_frame(&stored, level)
            })
            .collect::<Result<_, _>>()
            .map_err(|cause| StoreError::Format { path: self.source.clone(), cause })?;
        for (bytes, mut frame) in compressed {
            self.out.append(&bytes).map_err(write_error("write shard", &self.path))?;
            frame.offset = self.offset;
            self.offset += frame.len as u64;
            self.frames.push(frame);
        }
        Ok(())
    }

    /// Checks that every value byte was given, writes the last frames and
    /// the header, and syncs the file.
    pub fn finish(mut self) -> Result<ShardSizes, StoreError> {
        let expected = self.header.values_len();
        if self.written != expected {
            let cause = FormatError::ValuesLength { expected, got: self.written };
            return Err(StoreError::Format { path: self.path.clone(), cause });
        }
        self.flush()?;
        let (material, width) = (self.header.material, self.header.width);
        let compressed = CompressedHeader {
            shard: self.header,
            content: self.content,
            packing: self.packing,
            level: self.level,
            frames: self.frames,
        };
        let bytes = compressed.to_bytes();
        self.out.finish_with_head(&bytes).map_err(write_error("write shard", &self.path))?;
        Ok(ShardSizes { material, states: self.states, value_bytes: expected, file_bytes: self.offset, width })
    }
}

/// Values other than no value in `values`, stored `width` wide. Bytes
/// are counted in u8 lanes 255 bytes at a time: `filter().count()`
/// widened every byte to a u64 and cost 6% of compressing at level 3.
fn states_with_value(values: &[u8], width: ValueWidth) -> u64 {
    match width {
        ValueWidth::Byte => {
            values.chunks(255).map(|chunk| u64::from(chunk.iter().map(|&b| u8::from(b != NO_VALUE)).sum::<u8>())).sum()
        }
        ValueWidth::Word => values.chunks_exact(2).filter(|w| w != &[0, 0]).count() as u64,
    }
}

fn write_error(action: &'static str, path: &Path) -> impl Fn(std::io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |cause| StoreError::Io { action, path: path.clone(), cause }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Material;
    use crate::rules::{CardState, Rules};

    /// The byte the rules give card state `k` of a layout with [`recomputable`]
    /// entry `entry`, or `None` if the state's value is stored.
    #[inline]
    fn fixed_byte(entry: u32, k: usize) -> Option<u8> {
        if entry & GAME_OVER != 0 {
            Some(NO_VALUE)
        } else if entry >> k & 1 != 0 {
            Some(WIN_IN_1)
        } else {
            None
        }
    }

    #[test]
    fn recomputable_states_follow_the_rules_across_block_edges() {
        let rules = Rules::default();
        let wins = WinsInOne::new(&rules.cards);
        let small = MaterialIndex::new(Material::new(2, 1));
        let len = small.layouts() * CARD_STATES as u64;
        // 3v2: layouts of 2 x 3 masters in each placement, and ranges that
        // start and end inside placements.
        let large = MaterialIndex::new(Material::new(3, 2));
        let placement = 6 * CARD_STATES as u64;
        let cases = [(&small, 0..len), (&small, 7..len - 11), (&small, 31..59)].into_iter().chain(
            [(0, 1), (placement + 35, placement * 3 + 100), (placement * 9_001 + 95, placement * 9_004 + 5)]
                .map(|(start, end)| (&large, start..end)),
        );
        // Ranges that start and end inside layouts.
        for (index, range) in cases {
            let entries = recomputable(index, &wins, &range);
            let fixed: Vec<Option<u8>> = segments(&range)
                .flat_map(|(j, card_states, _)| card_states.map(move |k| (j, k)))
                .map(|(j, k)| fixed_byte(entries[j], k))
                .collect();
            assert_eq!(fixed.len() as u64, range.end - range.start);
            assert_eq!(stored_states(&range, &entries), fixed.iter().filter(|f| f.is_none()).count());
            for (i, &fix) in fixed.iter().enumerate() {
                let at = range.start + i as u64;
                let layout = index.unrank(at / 30);
                let position = layout.with_cards(CardState::new((at % 30) as usize));
                let expected = if position.is_game_over() {
                    Some(NO_VALUE)
                } else if position.moves(&rules).iter().any(|m| m.outcome == crate::rules::Outcome::Win) {
                    Some(WIN_IN_1)
                } else {
                    None
                };
                assert_eq!(fix, expected, "state {at}");
            }
        }
    }

    /// Gathering a layout's kept bytes and spreading them back agree with
    /// their byte-at-a-time definitions (debug builds check each call too)
    /// and undo each other, for masks with every 8-bit pattern in every
    /// chunk, and with few stored bytes left (the spreading's fallback).
    #[test]
    fn compacting_and_expanding_agree_with_their_definitions() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..4096u32 {
            let window: [u8; WINDOW_BYTES] = std::array::from_fn(|_| next() as u8);
            // Each 8-bit pattern at each chunk, random bits elsewhere.
            let (pattern, at) = (round % 256, 8 * (round / 256 % 4));
            let keep = (next() as u32 & !(0xff << at) | pattern << at) & ALL_CARD_STATES;
            let mut out = [0u8; WINDOW_BYTES + 8];
            let kept = compact(&window, keep, &mut out);
            let mut expected = [0u8; WINDOW_BYTES];
            assert_eq!(kept, compact_scalar(&window, keep, &mut expected));
            assert_eq!(out[..kept], expected[..kept]);
            for tail in [WINDOW_BYTES, kept] {
                let mut stored = out[..kept].to_vec();
                stored.resize(tail.max(kept), 0xaa);
                let mut states = [0u8; CARD_STATES];
                assert_eq!(expand(&stored, keep, &mut states), kept);
                for (k, &byte) in states.iter().enumerate() {
                    assert_eq!(byte, if keep >> k & 1 != 0 { window[k] } else { WIN_IN_1 }, "state {k}");
                }
            }
        }
    }

    #[test]
    fn states_with_value_counts_every_byte_but_holes() {
        let values: Vec<u8> = (0..10_000u32).map(|i| if i % 7 == 0 { NO_VALUE } else { (i % 251) as u8 | 1 }).collect();
        for len in [0, 1, 254, 255, 256, 511, 10_000] {
            let expected = values[..len].iter().filter(|&&b| b != NO_VALUE).count() as u64;
            assert_eq!(states_with_value(&values[..len], ValueWidth::Byte), expected, "{len} bytes");
        }
        // Words: a word is a state with a value unless both its bytes are 0.
        let words = [0u8, 0, 1, 0, 0, 1, 0, 0, 0xFF, 0xFF];
        assert_eq!(states_with_value(&words, ValueWidth::Word), 3);
    }

    #[test]
    fn frames_round_trip_and_damage_is_caught() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i / 1000) as u8).collect();
        let (frame, entry) = compress_frame(&bytes, 3).unwrap();
        assert!(frame.len() < bytes.len() / 10);
        assert_eq!(decompress_frame(&frame, bytes.len(), entry.content_crc, 0).unwrap(), bytes);
        assert!(decompress_frame(&frame, bytes.len() - 1, entry.content_crc, 0).is_err());
        assert!(matches!(
            decompress_frame(&frame, bytes.len(), entry.content_crc ^ 1, 4),
            Err(FormatError::ContentCrc { block: 4, .. })
        ));
        assert!(decompress_frame(&frame[..frame.len() / 2], bytes.len(), entry.content_crc, 0).is_err());
        assert!(
            zstd::zstd_safe::compress_bound(crate::format::BLOCK_BYTES as usize)
                <= crate::format::MAX_FRAME_BYTES as usize
        );
    }

    /// [`stored_bytes`] as first written, a state at a time: the oracle for
    /// the mask-based version.
    fn stored_bytes_per_state(
        index: &MaterialIndex,
        context: &Context,
        range: Range<u64>,
        values: &[u8],
        content: Content,
        packing: Packing,
    ) -> Result<Vec<u8>, FormatError> {
        assert_eq!(values.len() as u64, range.end - range.start, "one value per state of the range");
        let entries = recomputable(index, &context.wins, &range);
        for (j, card_states, first) in segments(&range) {
            for (i, k) in card_states.enumerate() {
                let value = values[first + i];
                let at = range.start + (first + i) as u64;
                match fixed_byte(entries[j], k) {
                    Some(fix) if value != fix => return Err(disagreement(index, at, value.into(), Some(fix))),
                    None if value == WIN_IN_1 || value == NO_VALUE => {
                        return Err(disagreement(index, at, value.into(), None));
                    }
                    _ => {}
                }
            }
        }
        let project = |value: u8| match content {
            Content::Values => value,
            Content::Wdl => wdl_byte(value),
        };
        let mut out = Vec::with_capacity(stored_capacity(&range, content, packing));
        match (packing, content) {
            (Packing::Filled, _) => {
                for (j, card_states, first) in segments(&range) {
                    for (i, k) in card_states.enumerate() {
                        let stored = fixed_byte(entries[j], k).is_none();
                        out.push(if stored { project(values[first + i]) } else { FILLER });
                    }
                }
            }
            (Packing::Dense, Content::Values) => {
                for (j, card_states, first) in segments(&range) {
                    for (i, k) in card_states.enumerate() {
                        if fixed_byte(entries[j], k).is_none() {
                            out.push(values[first + i]);
                        }
                    }
                }
            }
            (Packing::Dense, Content::Wdl) => {
                let (mut losses, mut draws) = (vec![0u32; entries.len()], vec![0u32; entries.len()]);
                for (j, card_states, first) in segments(&range) {
                    for (i, k) in card_states.enumerate() {
                        let value = values[first + i];
                        if fixed_byte(entries[j], k).is_some() {
                            continue;
                        }
                        if value < DRAW {
                            losses[j] |= 1 << k;
                        } else if value == DRAW {
                            draws[j] |= 1 << k;
                        }
                    }
                }
                out.extend(losses.iter().chain(&draws).flat_map(|mask| mask.to_le_bytes()));
            }
        }
        Ok(out)
    }

    /// The 2v2 values of the default card set: wins in one, game-over
    /// holes, losses, wins and draws all occur.
    fn solved_2v2() -> (Context, std::sync::Arc<MaterialIndex>, Vec<u8>) {
        let table = crate::table::Table::generate(&Rules::default(), 2).unwrap();
        let solved = table.material(Material::new(2, 2)).unwrap();
        let context = Context::new(Rules::default(), 2);
        let index = context.index(Material::new(2, 2));
        (context, index, solved.values.clone())
    }

    /// [`solved_2v2`], solved once for the property tests.
    fn solved_2v2_cached() -> &'static (Context, std::sync::Arc<MaterialIndex>, Vec<u8>) {
        static SOLVED: std::sync::OnceLock<(Context, std::sync::Arc<MaterialIndex>, Vec<u8>)> =
            std::sync::OnceLock::new();
        SOLVED.get_or_init(solved_2v2)
    }

    #[test]
    fn every_packing_gives_back_the_values_or_their_wdl() {
        let (context, index, values) = solved_2v2();
        assert!(values.contains(&DRAW), "the sample has draws");
        let len = values.len() as u64;
        // Ranges that start and end inside layouts, a one-state range, all.
        for range in [0..len, 7..len - 11, 31..59, 40..41] {
            let slice = &values[range.start as usize..range.end as usize];
            for content in [Content::Values, Content::Wdl] {
                let expected: Vec<u8> = match content {
                    Content::Values => slice.to_vec(),
                    Content::Wdl => slice.iter().map(|&v| wdl_byte(v)).collect(),
                };
                for packing in [Packing::Filled, Packing::Dense] {
                    let stored = stored_bytes(&index, &context, range.clone(), slice, content, packing).unwrap();
                    assert!(stored.len() <= stored_capacity(&range, content, packing));
                    let back = unpack(&index, &context, range.clone(), &stored, content, packing, 0).unwrap();
                    assert_eq!(back, expected, "{content:?} {packing:?} {range:?}");
                    let mut short = stored.clone();
                    short.pop();
                    assert!(matches!(
                        unpack(&index, &context, range.clone(), &short, content, packing, 9),
                        Err(FormatError::Decompress { block: 9, .. })
                    ));
                }
            }
        }
        // Dense values keep only the bytes the rules cannot give.
        let dense = stored_bytes(&index, &context, 0..len, &values, Content::Values, Packing::Dense).unwrap();
        let has_winning_move = values.iter().filter(|&&v| v == WIN_IN_1 || v == NO_VALUE).count();
        assert_eq!(dense.len(), values.len() - has_winning_move);
        // A state marked both lost and drawn is refused.
        let mut planes = stored_bytes(&index, &context, 0..len, &values, Content::Wdl, Packing::Dense).unwrap();
        let layouts = layouts_touched(&(0..len));
        let at = values.iter().position(|&v| v != WIN_IN_1 && v != NO_VALUE).unwrap();
        planes[(at / 30) * 4 + (at % 30) / 8] |= 1 << (at % 30 % 8);
        planes[(layouts + at / 30) * 4 + (at % 30) / 8] |= 1 << (at % 30 % 8);
        assert!(matches!(
            unpack(&index, &context, 0..len, &planes, Content::Wdl, Packing::Dense, 0),
            Err(FormatError::Decompress { .. })
        ));
    }

    #[test]
    fn filled_shards_written_before_dense_packing_still_read() {
        let (context, index, values) = solved_2v2();
        let tmp = tempfile::tempdir().unwrap();
        let rules = Rules::default();
        for packing in [Packing::Filled, Packing::Dense] {
            let path = tmp.path().join(format!("{packing:?}.onitbz"));
            let header = ShardHeader::for_material(&rules, 2, index.material, ValueWidth::Byte).unwrap();
            let header = ShardHeader { block_crcs: Vec::new(), ..header };
            let mut writer = CompressedShardWriter::create(&path, header, &context, 1, Content::Values).unwrap();
            writer.packing = packing;
            writer.write_values(&values).unwrap();
            writer.finish().unwrap();
            let shard = crate::shard::ShardFile::open(&path).unwrap();
            let crate::shard::Storage::Compressed(c) = shard.storage() else { panic!("compressed") };
            assert_eq!(c.packing, packing);
            let read: Vec<u8> =
                (0..shard.block_count()).flat_map(|b| shard.read_values(b, &context).unwrap()).collect();
            assert_eq!(read, values, "{packing:?}");
        }
    }

    /// Blocks of value words pack to the value bytes of their stored
    /// states (the byte packing's bytes, where no value is deep), deep
    /// words escaped and kept after them, and unpack to the same words,
    /// wherever a range starts and ends; a word that disagrees with the
    /// rules is named, and stored bytes of the wrong length are refused.
    #[test]
    fn value_words_pack_to_their_bytes_and_the_deep_ones_and_back() {
        let (context, index, bytes) = solved_2v2_cached();
        let mut words: Vec<u8> = bytes.iter().flat_map(|&b| widen(b).to_le_bytes()).collect();
        let len = words.len() as u64;
        for range in [0..len, 14..len - 22, 62..118, 80..82] {
            let slice = &words[range.start as usize..range.end as usize];
            let stored = stored_words(index, context, range.clone(), slice).unwrap();
            let byte_range = range.start / 2..range.end / 2;
            let byte_slice = &bytes[byte_range.start as usize..byte_range.end as usize];
            let dense = stored_bytes(index, context, byte_range, byte_slice, Content::Values, Packing::Dense);
            assert_eq!(stored, dense.unwrap(), "{range:?}: no deep value, the bytes");
            assert_eq!(unpack_words(index, context, range.clone(), &stored, 0).unwrap(), slice, "{range:?}");
        }
        // Deep values: a loss in 300 plies, a win in 299.
        let stored_states: Vec<usize> =
            (0..bytes.len()).filter(|&i| bytes[i] != WIN_IN_1 && bytes[i] != NO_VALUE).step_by(1000).collect();
        for (n, &i) in stored_states.iter().enumerate() {
            let deep = if n % 2 == 0 { crate::Value::Loss(300) } else { crate::Value::Win(299) };
            words[2 * i..2 * i + 2].copy_from_slice(&deep.to_word().to_le_bytes());
        }
        let stored = stored_words(index, context, 0..len, &words).unwrap();
        let dense = stored.len() - 2 * stored_states.len();
        assert_eq!(stored[..dense].iter().filter(|&&b| b == DEEP_WORD).count(), stored_states.len());
        assert!(stored.len() <= stored_word_capacity(&(0..len)));
        assert_eq!(unpack_words(index, context, 0..len, &stored, 0).unwrap(), words);
        for wrong in [&stored[1..], &stored[..stored.len() - 1], &[stored.as_slice(), &[7, 7]].concat()] {
            assert!(matches!(
                unpack_words(index, context, 0..len, wrong, 5),
                Err(FormatError::Decompress { block: 5, .. })
            ));
        }
        // A win in one stored as a win in three: the table is wrong.
        let at = bytes.iter().position(|&b| b == WIN_IN_1).unwrap();
        words[2 * at..2 * at + 2].copy_from_slice(&(WIN_IN_1_WORD - 1).to_le_bytes());
        let error = stored_words(index, context, 0..len, &words).unwrap_err();
        let FormatError::WrongValue { layout, card_state, stored, .. } = error else { panic!("{error}") };
        assert_eq!((layout * 30 + card_state as u64, stored), (at as u64, WIN_IN_1_WORD - 1));
    }

    /// Tables with value words compress: a word material's shard is
    /// version 2, the table reads back as it was, and compressing the
    /// compressed table again writes the same files. Their win/draw/loss
    /// shards are bytes, the same files as the byte table's; a writer
    /// asked for WDL of words refuses before it creates its file.
    #[test]
    fn word_tables_compress_and_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let (context, index, _) = solved_2v2_cached();
        let path = tmp.path().join("2v2.onitbz");
        let header = ShardHeader::for_material(&Rules::default(), 2, index.material, ValueWidth::Word).unwrap();
        let header = ShardHeader { block_crcs: Vec::new(), ..header };
        let Err(refused) = CompressedShardWriter::create(&path, header, context, 1, Content::Wdl) else {
            panic!("value words compressed to WDL")
        };
        assert!(matches!(&refused, StoreError::Format { cause: FormatError::WordContent(_), .. }), "{refused}");
        assert!(!path.exists() && !crate::blockio::unfinished_path(&path).exists());

        // A table with 1v1 and 2v2 in words.
        let table = crate::table::Table::generate(&Rules::default(), 2).unwrap();
        let mixed: Vec<_> = (table.materials().iter())
            .map(|m| match [Material::new(1, 1), index.material].contains(&m.index.material) {
                true => m.widened(),
                false => crate::table::SolvedMaterial {
                    index: MaterialIndex::new(m.index.material),
                    values: m.values.clone(),
                    width: ValueWidth::Byte,
                },
            })
            .collect();
        let mixed = crate::table::Table::new(*table.rules(), 2, mixed);
        let (input, bytes_input) = (tmp.path().join("mixed"), tmp.path().join("bytes"));
        crate::store::save(&mixed, &input).unwrap();
        crate::store::save(&table, &bytes_input).unwrap();
        let output = tmp.path().join("out");
        let sizes = compress_table(&input, &output, 1, Content::Values, &|_| {}).unwrap();
        let widths: Vec<ValueWidth> = sizes.iter().map(|s| s.width).collect();
        use ValueWidth::{Byte, Word};
        assert_eq!(widths, [Word, Byte, Byte, Word]);
        let words = &sizes[3];
        assert_eq!((words.value_bytes, words.states), (index.layouts() * 60, table.stats().1[3].1.states));
        assert!(words.file_bytes < words.value_bytes / 8, "{words:?}");
        let files = TableFiles::open(&output).unwrap();
        assert!(files.shards.iter().all(|s| s.is_compressed()));
        assert_eq!(files.stats().unwrap(), table.stats());
        let loaded = files.load().unwrap();
        assert!(
            loaded.materials().iter().zip(mixed.materials()).all(|(a, b)| a.values == b.values && a.width == b.width)
        );
        let again = tmp.path().join("again");
        compress_table(&output, &again, 1, Content::Values, &|_| {}).unwrap();
        for shard in ["1v1", "1v2", "2v1", "2v2"].map(|m| format!("{m}.onitbz")) {
            let read = |dir: &Path| std::fs::read(dir.join(&shard)).unwrap();
            assert!(read(&output) == read(&again), "{shard} written again the same");
        }

        // Win/draw/loss only: bytes, as the byte table's.
        let (wdl, bytes_wdl) = (tmp.path().join("wdl"), tmp.path().join("bytes-wdl"));
        let sizes = compress_table(&input, &wdl, 1, Content::Wdl, &|_| {}).unwrap();
        assert!(sizes.iter().all(|s| s.width == Byte));
        compress_table(&bytes_input, &bytes_wdl, 1, Content::Wdl, &|_| {}).unwrap();
        for shard in ["1v1", "1v2", "2v1", "2v2"].map(|m| format!("{m}.onitbz")) {
            let read = |dir: &Path| std::fs::read(dir.join(&shard)).unwrap();
            assert!(read(&wdl) == read(&bytes_wdl), "{shard}: the byte table's WDL shard");
        }
    }

    /// However the values come in (a byte run at a time, block by block,
    /// all at once, cut inside a block then the rest) and however many
    /// blocks a batch holds, on one thread or two, the writer writes the
    /// same file: whole blocks compressed where they lie are the blocks
    /// copied first.
    #[test]
    fn whole_blocks_compressed_in_place_write_the_same_shard() {
        let (context, index, values) = solved_2v2_cached();
        assert!(values.len() > 2 * BLOCK_BYTES as usize, "several blocks");
        let tmp = tempfile::tempdir().unwrap();
        let write = |name: &str, cuts: &[usize], batch_blocks: Option<usize>| -> Vec<u8> {
            let path = tmp.path().join(name);
            let header = ShardHeader::for_material(&Rules::default(), 2, index.material, ValueWidth::Byte).unwrap();
            let header = ShardHeader { block_crcs: Vec::new(), ..header };
            let mut writer = CompressedShardWriter::create(&path, header, context, 1, Content::Values).unwrap();
            if let Some(blocks) = batch_blocks {
                writer = writer.batch_blocks(blocks);
            }
            let mut at = 0;
            for &cut in cuts.iter().chain([values.len()].iter()) {
                writer.write_values(&values[at..cut]).unwrap();
                at = cut;
            }
            let sizes = writer.finish().unwrap();
            assert_eq!(sizes.states, values.iter().filter(|&&v| v != NO_VALUE).count() as u64);
            let bytes = std::fs::read(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            bytes
        };
        // Never a whole block in one call: every block is copied.
        let copied = write("copied", &(4093..values.len()).step_by(4093).collect::<Vec<_>>(), None);
        let block = BLOCK_BYTES as usize;
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                for (name, cuts, batch) in [
                    ("all", vec![], None),
                    ("all-batches-of-one", vec![], Some(1)),
                    ("by-block", vec![block, 2 * block], None),
                    ("cut-inside", vec![100], None),
                    ("cut-inside-batches-of-one", vec![100, block + 7], Some(1)),
                ] {
                    assert!(write(name, &cuts, batch) == copied, "{name}, {threads} threads");
                }
            });
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// The mask-based packing gives what the per-state one gives, bytes
        /// or the first disagreement, on solved values with a few bytes
        /// changed to anything (wins in one, holes, losses, draws).
        #[test]
        fn stored_bytes_agree_with_the_per_state_oracle(
            start in 0u64..200_000,
            len in 1u64..5_000,
            changes in proptest::collection::vec((0u64..5_000, proptest::prelude::any::<u8>()), 0..3),
            kind in 0usize..4,
        ) {
            let (context, index, values) = solved_2v2_cached();
            let end = (start + len).min(values.len() as u64);
            let range = start.min(end - 1)..end;
            let mut slice = values[range.start as usize..range.end as usize].to_vec();
            for &(at, byte) in &changes {
                let at = (at % len) as usize;
                if let Some(value) = slice.get_mut(at) {
                    *value = byte;
                }
            }
            let (content, packing) = [
                (Content::Values, Packing::Filled),
                (Content::Wdl, Packing::Filled),
                (Content::Values, Packing::Dense),
                (Content::Wdl, Packing::Dense),
            ][kind];
            proptest::prop_assert_eq!(
                stored_bytes(index, context, range.clone(), &slice, content, packing),
                stored_bytes_per_state(index, context, range.clone(), &slice, content, packing)
            );
        }

        /// Whatever a frame decompresses to (a crafted file can carry any
        /// bytes under a valid checksum), unpacking returns values or an
        /// error, never a panic; bytes of the right length for the range
        /// often are values.
        #[test]
        fn unpacking_any_bytes_never_panics(
            start in 0u64..200_000,
            len in 1u64..5_000,
            seed in proptest::prelude::any::<u64>(),
            exact in proptest::prelude::any::<bool>(),
            kind in 0usize..4,
        ) {
            let context = Context::new(Rules::default(), 2);
            let index = context.index(Material::new(2, 2));
            let end = (start + len).min(index.layouts() * CARD_STATES as u64);
            let range = start.min(end - 1)..end;
            let (content, packing) = [
                (Content::Values, Packing::Filled),
                (Content::Wdl, Packing::Filled),
                (Content::Values, Packing::Dense),
                (Content::Wdl, Packing::Dense),
            ][kind];
            let right_len = match (packing, content) {
                (Packing::Dense, Content::Values) => {
                    stored_states(&range, &recomputable(&index, &context.wins, &range))
                }
                _ => stored_capacity(&range, content, packing),
            };
            let stored = noise(seed, if exact { right_len } else { (seed % 3000) as usize });
            let result = unpack(&index, &context, range.clone(), &stored, content, packing, 0);
            if let Ok(values) = &result {
                proptest::prop_assert_eq!(values.len() as u64, range.end - range.start);
                proptest::prop_assert_eq!(stored.len(), right_len);
            }
            if stored.len() != right_len {
                proptest::prop_assert!(result.is_err());
            }
        }

        /// [`unpacking_any_bytes_never_panics`] for blocks of value words.
        #[test]
        fn unpacking_any_bytes_as_words_never_panics(
            start in 0u64..200_000,
            len in 1u64..2_500,
            seed in proptest::prelude::any::<u64>(),
            exact in proptest::prelude::any::<bool>(),
        ) {
            let context = Context::new(Rules::default(), 2);
            let index = context.index(Material::new(2, 2));
            let end = (start + len).min(index.layouts() * CARD_STATES as u64);
            let states = start.min(end - 1)..end;
            let count = stored_states(&states, &recomputable(&index, &context.wins, &states));
            // Right lengths often: `count` bytes with no 0 among them.
            let mut stored = noise(seed, if exact { count } else { (seed % 3000) as usize });
            if exact {
                stored.iter_mut().for_each(|b| *b |= 1);
            }
            let range = 2 * states.start..2 * states.end;
            let result = unpack_words(&index, &context, range.clone(), &stored, 0);
            if let Ok(values) = &result {
                proptest::prop_assert_eq!(values.len() as u64, range.end - range.start);
            }
            let deep = stored.iter().take(count).filter(|&&b| b == DEEP_WORD).count();
            proptest::prop_assert_eq!(result.is_ok(), stored.len() == count + 2 * deep);
        }
    }

    /// `len` bytes of xorshift noise from `seed`: what a crafted frame
    /// could decompress to.
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    }
}

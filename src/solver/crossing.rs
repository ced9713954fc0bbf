//! Successor blocks of crossing moves, put in the order of the moving
//! placement's layouts.
//!
//! A move whose piece passes another of the mover's pieces (in square
//! order) changes the masters' ordinals, so layout (a, b) of the placement
//! reads its successor's word at a column of the block other than its own
//! (`kernel::visit_crossing`, `kernel::fold_kept_blocks`). The
//! columns move the same way in every row, by where the moving piece's
//! ordinal goes: a permutation of the block's words that depends only on
//! the material (p, q) and the two ordinals.
//! Here that permutation is applied with byte shuffles (about 18% of the
//! steps' folded moves at 6 men cross), so the fold then reads the block
//! in order as it does for other moves.
//!
//! Owns the shuffle tables and the permutation's definition; knows nothing
//! of lanes, steps or what is folded.

use crate::rules::MAX_PIECES_PER_SIDE;

/// Most words of a block: p * q layouts.
const MAX_BLOCK_WORDS: usize = MAX_PIECES_PER_SIDE * MAX_PIECES_PER_SIDE;
/// 16-byte vectors of the largest block.
const MAX_VECTORS: usize = MAX_BLOCK_WORDS.div_ceil(4);
/// Words of a permuted block as written: whole vectors.
pub(super) const PERMUTED_WORDS: usize = MAX_VECTORS * 4;
/// Shuffle index that makes a zero byte.
const ZERO_BYTE: u8 = 0x80;

/// The permuted block's word `w` (row r = w / p, column d = w % p) is the
/// block's word r * p + `column`, where `column` is that of the mover's
/// master after the move for layout a = p - 1 - d: the moving piece's
/// ordinal goes from `from` to `to` (in square order), the pieces between
/// close up, and columns count from the top.
fn source(p: usize, w: usize, (from, to): (usize, usize)) -> usize {
    let (row, a) = (w / p, p - 1 - w % p);
    let ordinal = if a == from {
        to
    } else {
        let closed = a - (a > from) as usize;
        closed + (closed >= to) as usize
    };
    row * p + (p - 1 - ordinal)
}

/// The block's words in the order of the placement's layouts, for blocks
/// of 4 words or more: `out[w] = block[source(w)]` for w < p * q.
#[derive(Clone, Copy)]
struct Shuffles {
    /// Per output vector k (words 4k..4k + 4), the byte shuffles of input
    /// vectors k - 1, k and k + 1 ([`input_start`]), ORed: a word moves by
    /// less than a row (p <= 5 words), so no further.
    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    masks: [[std::arch::x86_64::__m128i; 3]; MAX_VECTORS],
}

/// Where input vector j of a block of `words` starts: at 4j, but the last
/// one of a block that is not whole vectors ends with the block (overlapping
/// the one before), so that no load reads past it.
fn input_start(words: usize, j: usize) -> usize {
    if (j + 1) * 4 > words { words - 4 } else { 4 * j }
}

impl Shuffles {
    /// Shuffle bytes: per output vector and input vector, 16 indexes.
    fn bytes(p: usize, q: usize, ordinals: (usize, usize)) -> [[[u8; 16]; 3]; MAX_VECTORS] {
        let words = p * q;
        let vectors = words.div_ceil(4);
        let mut masks = [[[ZERO_BYTE; 16]; 3]; MAX_VECTORS];
        for w in 0..words {
            let s = source(p, w, ordinals);
            let k = w / 4;
            // The input vector that holds s, nearest k.
            let j = (k.saturating_sub(1)..(k + 2).min(vectors))
                .find(|&j| (input_start(words, j)..input_start(words, j) + 4).contains(&s))
                .expect("a word moves within its row");
            let lane = s - input_start(words, j);
            for byte in 0..4 {
                masks[k][j + 1 - k][(w % 4) * 4 + byte] = (lane * 4 + byte) as u8;
            }
        }
        masks
    }

    /// No shuffles where there is no vector version: nothing reads them.
    #[cfg(not(all(target_arch = "x86_64", target_feature = "ssse3")))]
    fn new(_: [[[u8; 16]; 3]; MAX_VECTORS]) -> Shuffles {
        Shuffles {}
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    fn new(bytes: [[[u8; 16]; 3]; MAX_VECTORS]) -> Shuffles {
        // SAFETY: the only requirement of a `target_feature` function is
        // that the CPU has the feature, and this build assumes SSSE3 (the
        // `cfg` above: `.cargo/config.toml` builds for x86-64-v3, and
        // `main` checks the CPU has it).
        let load = |bytes: [u8; 16]| unsafe { super::layout_bytes::load(&bytes) };
        Shuffles { masks: bytes.map(|per_input| per_input.map(load)) }
    }
}

/// The shuffles of every material and pair of ordinals, built once.
pub(super) struct CrossingTable {
    /// By [`CrossingTable::entry`].
    #[cfg_attr(not(all(target_arch = "x86_64", target_feature = "ssse3")), allow(dead_code))]
    shuffles: Vec<Shuffles>,
}

impl CrossingTable {
    pub fn new() -> CrossingTable {
        let n = MAX_PIECES_PER_SIDE;
        let mut shuffles = Vec::with_capacity(n.pow(4));
        for p in 1..=n {
            for q in 1..=n {
                for from in 0..n {
                    for to in 0..n {
                        let usable = p * q >= 4 && from < p && to < p;
                        shuffles.push(Shuffles::new(if usable {
                            Shuffles::bytes(p, q, (from, to))
                        } else {
                            [[[ZERO_BYTE; 16]; 3]; MAX_VECTORS]
                        }));
                    }
                }
            }
        }
        CrossingTable { shuffles }
    }

    #[cfg_attr(not(all(target_arch = "x86_64", target_feature = "ssse3")), allow(dead_code))]
    fn entry(p: usize, q: usize, (from, to): (usize, usize)) -> usize {
        let n = MAX_PIECES_PER_SIDE;
        (((p - 1) * n + (q - 1)) * n + from) * n + to
    }

    /// `block` (p * q words, a crossing move's successor block) in the
    /// order of the moving placement's layouts, the moving piece's ordinal
    /// going from `from` to `to`: word w of the result is the word that
    /// layout slot w folds (the words past p * q are unspecified).
    #[inline(always)]
    pub fn permuted<const N: usize>(
        &self,
        block: &[u32; N],
        (p, q): (usize, usize),
        (from, to): (usize, usize),
    ) -> [u32; PERMUTED_WORDS] {
        // q is the caller's: N / p is a division at every crossing move.
        debug_assert!(N == p * q && from < p && to < p, "a block of p * q words");
        #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
        if N >= 4 {
            let shuffles = &self.shuffles[CrossingTable::entry(p, q, (from, to))];
            // SAFETY: as in `Shuffles::new`: this build assumes SSSE3.
            let out = unsafe { permuted_vector(block, shuffles) };
            debug_assert_eq!(
                out[..N],
                permuted_scalar(block, p, (from, to))[..N],
                "the shuffles agree with the definition"
            );
            return out;
        }
        permuted_scalar(block, p, (from, to))
    }
}

/// The definition, word by word: what [`CrossingTable::permuted`] gives.
pub(super) fn permuted_scalar(block: &[u32], p: usize, ordinals: (usize, usize)) -> [u32; PERMUTED_WORDS] {
    let mut out = [0; PERMUTED_WORDS];
    for (w, out) in out[..block.len()].iter_mut().enumerate() {
        *out = block[source(p, w, ordinals)];
    }
    out
}

/// [`CrossingTable::permuted`] by byte shuffles, for blocks of N >= 4 words.
#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
#[target_feature(enable = "ssse3")]
#[inline]
fn permuted_vector<const N: usize>(block: &[u32; N], shuffles: &Shuffles) -> [u32; PERMUTED_WORDS] {
    use std::arch::x86_64::*;
    let vectors = N.div_ceil(4);
    let inputs: [__m128i; MAX_VECTORS] = std::array::from_fn(|j| {
        if j < vectors {
            let start = input_start(N, j);
            _mm_set_epi32(
                block[start + 3] as i32,
                block[start + 2] as i32,
                block[start + 1] as i32,
                block[start] as i32,
            )
        } else {
            _mm_setzero_si128()
        }
    });
    let mut out = [_mm_setzero_si128(); MAX_VECTORS];
    for k in 0..vectors {
        let masks = &shuffles.masks[k];
        let mut v = _mm_shuffle_epi8(inputs[k], masks[1]);
        if k > 0 {
            v = _mm_or_si128(v, _mm_shuffle_epi8(inputs[k - 1], masks[0]));
        }
        if k + 1 < vectors {
            v = _mm_or_si128(v, _mm_shuffle_epi8(inputs[k + 1], masks[2]));
        }
        out[k] = v;
    }
    // SAFETY: both types are plain bits of the same size (7 vectors of 16
    // bytes, 28 words of 4), and every bit pattern is a valid word. The
    // fold then reads the words as whole vectors from where they were
    // stored whole (a store forwarded to each load).
    unsafe { std::mem::transmute::<[__m128i; MAX_VECTORS], [u32; PERMUTED_WORDS]>(out) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition agrees with the kernel's: layout (a, b) reads the
    /// block's word at the column of its master after the move, counted
    /// from the top, for every placement's move that passes a piece.
    #[test]
    fn source_is_where_the_master_ends_up() {
        for p in 2..=MAX_PIECES_PER_SIDE {
            // The mover's pieces on squares 0, 2, 4, ...: a piece moves from
            // its square to a gap, passing some of the others.
            let squares: Vec<u8> = (0..p as u8).map(|i| 2 * i).collect();
            let mover: u32 = squares.iter().map(|&s| 1 << s).sum();
            for from in 0..p {
                for gap in 0..=p {
                    let to_square = if gap == 0 { 1 } else { 2 * gap as u8 - 1 };
                    let moved = mover ^ 1 << squares[from] ^ 1 << to_square;
                    let to = (moved & ((1 << to_square) - 1)).count_ones() as usize;
                    for (a, &square) in squares.iter().enumerate() {
                        let master = if a == from { to_square } else { square };
                        let column = (moved >> master >> 1).count_ones() as usize;
                        for row in 0..3 {
                            let w = row * p + (p - 1 - a);
                            assert_eq!(source(p, w, (from, to)), row * p + column, "p {p} from {from} to {to} a {a}");
                        }
                    }
                }
            }
        }
    }

    /// The shuffles give the definition's words for every material of four
    /// words or more and every pair of ordinals, and read no word past the
    /// block.
    #[test]
    fn shuffles_agree_with_the_definition() {
        let table = CrossingTable::new();
        for p in 1..=MAX_PIECES_PER_SIDE {
            for q in 1..=MAX_PIECES_PER_SIDE {
                let block: [u32; MAX_BLOCK_WORDS] = std::array::from_fn(|w| 0x0101_0101 * (w as u32 + 1));
                let block = &block[..p * q];
                for from in 0..p {
                    for to in 0..p {
                        let out = match p * q {
                            1 => table.permuted::<1>(block.try_into().unwrap(), (p, q), (from, to)),
                            2 => table.permuted::<2>(block.try_into().unwrap(), (p, q), (from, to)),
                            3 => table.permuted::<3>(block.try_into().unwrap(), (p, q), (from, to)),
                            4 => table.permuted::<4>(block.try_into().unwrap(), (p, q), (from, to)),
                            5 => table.permuted::<5>(block.try_into().unwrap(), (p, q), (from, to)),
                            6 => table.permuted::<6>(block.try_into().unwrap(), (p, q), (from, to)),
                            8 => table.permuted::<8>(block.try_into().unwrap(), (p, q), (from, to)),
                            9 => table.permuted::<9>(block.try_into().unwrap(), (p, q), (from, to)),
                            10 => table.permuted::<10>(block.try_into().unwrap(), (p, q), (from, to)),
                            12 => table.permuted::<12>(block.try_into().unwrap(), (p, q), (from, to)),
                            15 => table.permuted::<15>(block.try_into().unwrap(), (p, q), (from, to)),
                            16 => table.permuted::<16>(block.try_into().unwrap(), (p, q), (from, to)),
                            20 => table.permuted::<20>(block.try_into().unwrap(), (p, q), (from, to)),
                            25 => table.permuted::<25>(block.try_into().unwrap(), (p, q), (from, to)),
                            n => unreachable!("no material has {n} layouts a placement"),
                        };
                        let expected = permuted_scalar(block, p, (from, to));
                        assert_eq!(out[..p * q], expected[..p * q], "p {p} q {q} from {from} to {to}");
                    }
                }
            }
        }
    }
}

//! A layout's 30 value bytes (one per card state) worked on whole: on
//! x86_64 as two overlapping 16-byte vectors, states 0..16 and 14..30, so
//! that both are whole loads and stores inside the layout's bytes; the
//! scalar definitions serve other targets, and debug builds (the tests
//! included) check every vector result against them.
//!
//! Owns only that byte plumbing: what a byte means is `value`'s, which
//! states to set or how to permute them is the caller's.

use crate::rules::CARD_STATES;

/// First state of the upper vector: 30 - 16.
pub(super) const HIGH_START: usize = CARD_STATES - 16;
/// A shuffle index that makes a zero byte.
const ZERO_BYTE: u8 = 0x80;

/// Sets the bytes of card states `states` (bit k: state k) to `byte`, for
/// each `(states, byte)` of `fills` in order, by loading both vectors,
/// blending each fill in and storing them once: for bytes the cache holds
/// (initialisation has just read them). One load and store for all the
/// fills: a second call's load of the upper vector would span both of the
/// first call's stores, which the CPU cannot forward (`perf annotate` put
/// 16% of initialisation's samples just after that load; the A/B of the
/// change was within the noise, docs/BENCHMARKS.md, session 46). Resident
/// steps use it too, for bytes they asked for at the start of the visit
/// (`kernel::StepValues::decide`), and streamed finishing for the decision
/// log's entries (session 68).
#[inline(always)]
pub(super) fn set_cached<const N: usize>(values: &mut [u8; CARD_STATES], fills: [(u32, u8); N]) {
    #[cfg(debug_assertions)]
    let expected = {
        let mut expected = *values;
        set_scalar(&mut expected, fills);
        expected
    };
    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
    // SAFETY: the only requirement of a `target_feature` function is that
    // the CPU has the feature, and this build assumes it for every function
    // (the `cfg` above: `.cargo/config.toml` builds for x86-64-v3, which has
    // SSE4.1, and `main` checks the CPU has it).
    unsafe {
        set_vector(values, None, fills)
    };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.1")))]
    set_scalar(values, fills);
    #[cfg(debug_assertions)]
    debug_assert_eq!(*values, expected, "the vector fill agrees with the scalar definition");
}

/// Sets every byte to `base`, then as [`set_cached`] does: the same two
/// stores, with nothing loaded first (for bytes about to be written whole:
/// streamed finishing's `kernel::settle`, where a store per state had
/// been about a tenth of the samples of finishing 3v4+4v3 at 8 men;
/// docs/BENCHMARKS.md, session 68).
#[inline(always)]
pub(super) fn set_all<const N: usize>(values: &mut [u8; CARD_STATES], base: u8, fills: [(u32, u8); N]) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
    // SAFETY: as in `set_cached`: this build assumes SSE4.1 everywhere.
    unsafe {
        set_vector(values, Some(base), fills)
    };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.1")))]
    {
        values.fill(base);
        set_scalar(values, fills);
    }
    #[cfg(debug_assertions)]
    debug_assert_eq!(
        *values,
        {
            let mut expected = [base; CARD_STATES];
            set_scalar(&mut expected, fills);
            expected
        },
        "the vector fill agrees with the scalar definition"
    );
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse4.1", not(debug_assertions)), allow(dead_code))]
fn set_scalar<const N: usize>(values: &mut [u8; CARD_STATES], fills: [(u32, u8); N]) {
    for (states, byte) in fills {
        for (k, value) in values.iter_mut().enumerate() {
            if states >> k & 1 != 0 {
                *value = byte;
            }
        }
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
#[target_feature(enable = "sse4.1")]
#[inline]
fn set_vector<const N: usize>(values: &mut [u8; CARD_STATES], base: Option<u8>, fills: [(u32, u8); N]) {
    use std::arch::x86_64::*;
    let (mut low, mut high) = match base {
        Some(base) => (_mm_set1_epi8(base as i8), _mm_set1_epi8(base as i8)),
        None => (load(&values[..16]), load(&values[HIGH_START..])),
    };
    for (states, byte) in fills {
        let fill = _mm_set1_epi8(byte as i8);
        low = _mm_blendv_epi8(low, fill, byte_mask(states));
        high = _mm_blendv_epi8(high, fill, byte_mask(states >> HIGH_START));
    }
    // The halves agree on the states they share.
    store(high, &mut values[HIGH_START..]);
    store(low, &mut values[..16]);
}

/// 0xff in byte i where bit i of `bits` is set (i < 16), else 0.
#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
#[target_feature(enable = "sse4.1")]
#[inline]
fn byte_mask(bits: u32) -> std::arch::x86_64::__m128i {
    use std::arch::x86_64::*;
    // Bytes 0..8 get the low byte of `bits`, 8..16 the next.
    let spread = _mm_shuffle_epi8(_mm_set1_epi16(bits as u16 as i16), _mm_set_epi64x(0x0101_0101_0101_0101, 0));
    let bit = _mm_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
    _mm_cmpeq_epi8(_mm_and_si128(spread, bit), bit)
}

/// The card states whose byte is `byte` (bit k: state k): two byte
/// comparisons and their masks on x86_64.
#[inline(always)]
pub(super) fn states_holding(values: &[u8; CARD_STATES], byte: u8) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
    // SAFETY: as in `set_cached`: this build assumes SSE4.1 everywhere.
    let states = unsafe { states_holding_vector(values, byte) };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.1")))]
    let states = states_holding_scalar(values, byte);
    debug_assert_eq!(states, states_holding_scalar(values, byte), "the vector comparison agrees with the scalar one");
    states
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse4.1", not(debug_assertions)), allow(dead_code))]
fn states_holding_scalar(values: &[u8; CARD_STATES], byte: u8) -> u32 {
    values.iter().enumerate().fold(0, |states, (k, &value)| states | ((value == byte) as u32) << k)
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
#[target_feature(enable = "sse4.1")]
#[inline]
fn states_holding_vector(values: &[u8; CARD_STATES], byte: u8) -> u32 {
    use std::arch::x86_64::*;
    let fill = _mm_set1_epi8(byte as i8);
    let low = _mm_movemask_epi8(_mm_cmpeq_epi8(load(&values[..16]), fill)) as u32;
    let high = _mm_movemask_epi8(_mm_cmpeq_epi8(load(&values[HIGH_START..]), fill)) as u32;
    // The halves agree on the states they share.
    low | high << HIGH_START
}

/// A fixed permutation of a layout's bytes: `out[j] = values[from[j]]`.
#[derive(Clone, Copy)]
pub(super) struct Permutation {
    from: [u8; CARD_STATES],
    /// Shuffles of the vector version: the low (states 0..16) and high
    /// (14..30) output vectors, each from the low and the high input
    /// vector (an index per output byte, [`ZERO_BYTE`] where the other
    /// input vector gives it).
    #[cfg_attr(not(all(target_arch = "x86_64", target_feature = "ssse3")), allow(dead_code))]
    shuffles: [[[u8; 16]; 2]; 2],
}

impl Permutation {
    /// The permutation taking byte `from[j]` to `j`. Panics if `from` is
    /// not a permutation of 0..30.
    pub fn new(from: [u8; CARD_STATES]) -> Permutation {
        let mut seen = [false; CARD_STATES];
        for &k in &from {
            assert!(!std::mem::replace(&mut seen[k as usize], true), "state {k} taken twice");
        }
        let shuffle = |first_out: usize, input: usize| -> [u8; 16] {
            std::array::from_fn(|i| {
                let source = from[first_out + i] as usize;
                // A byte of both input vectors (14, 15) comes from the low.
                let in_low = source < 16;
                match (input, in_low) {
                    (0, true) => source as u8,
                    (1, false) => (source - HIGH_START) as u8,
                    _ => ZERO_BYTE,
                }
            })
        };
        let shuffles = [[shuffle(0, 0), shuffle(0, 1)], [shuffle(HIGH_START, 0), shuffle(HIGH_START, 1)]];
        Permutation { from, shuffles }
    }

    /// `out[j] = values[from[j]]` for every j.
    #[inline(always)]
    pub fn apply(&self, values: &[u8; CARD_STATES], out: &mut [u8; CARD_STATES]) {
        #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
        // SAFETY: as in `set_cached`: this build assumes SSSE3.
        unsafe {
            self.apply_vector(values, out)
        };
        #[cfg(not(all(target_arch = "x86_64", target_feature = "ssse3")))]
        self.apply_scalar(values, out);
        #[cfg(debug_assertions)]
        {
            let mut expected = [0; CARD_STATES];
            self.apply_scalar(values, &mut expected);
            debug_assert_eq!(*out, expected, "the vector permutation agrees with the scalar definition");
        }
    }

    /// [`Self::apply`] to a layout's 30 little-endian value words: `out`'s
    /// word j is `values`' word `from[j]`.
    pub fn apply_words(&self, values: &[u8], out: &mut [u8]) {
        assert!(values.len() == 2 * CARD_STATES && out.len() == 2 * CARD_STATES, "a layout's value words");
        for (j, &k) in self.from.iter().enumerate() {
            let k = k as usize;
            out[2 * j..2 * j + 2].copy_from_slice(&values[2 * k..2 * k + 2]);
        }
    }

    #[cfg_attr(all(target_arch = "x86_64", target_feature = "ssse3", not(debug_assertions)), allow(dead_code))]
    fn apply_scalar(&self, values: &[u8; CARD_STATES], out: &mut [u8; CARD_STATES]) {
        for (out, &k) in out.iter_mut().zip(&self.from) {
            *out = values[k as usize];
        }
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    #[target_feature(enable = "ssse3")]
    #[inline]
    fn apply_vector(&self, values: &[u8; CARD_STATES], out: &mut [u8; CARD_STATES]) {
        use std::arch::x86_64::*;
        let input = [load(&values[..16]), load(&values[HIGH_START..])];
        let [low, high] = self.shuffles.map(|[from_low, from_high]| {
            _mm_or_si128(_mm_shuffle_epi8(input[0], load(&from_low)), _mm_shuffle_epi8(input[1], load(&from_high)))
        });
        store(high, &mut out[HIGH_START..]);
        store(low, &mut out[..16]);
    }
}

/// 16 bytes as a vector (safe: two 8-byte reads the compiler merges).
#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
#[target_feature(enable = "sse2")]
#[inline]
pub(super) fn load(bytes: &[u8]) -> std::arch::x86_64::__m128i {
    let bytes: &[u8; 16] = bytes[..16].try_into().expect("16 bytes");
    let half = |i: usize| i64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    std::arch::x86_64::_mm_set_epi64x(half(8), half(0))
}

/// A vector into 16 bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
#[target_feature(enable = "sse2")]
#[inline]
pub(super) fn store(vector: std::arch::x86_64::__m128i, bytes: &mut [u8]) {
    use std::arch::x86_64::*;
    let low = _mm_cvtsi128_si64(vector);
    let high = _mm_cvtsi128_si64(_mm_unpackhi_epi64(vector, vector));
    bytes[..8].copy_from_slice(&low.to_le_bytes());
    bytes[8..16].copy_from_slice(&high.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(seed: &mut u32) -> u32 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 17;
        *seed ^= *seed << 5;
        *seed
    }

    /// Setting bytes writes exactly the given states' bytes, whatever the
    /// bytes were, a later fill over an earlier one (the debug check
    /// inside compares with the scalar loop; this compares with a third
    /// writing).
    #[test]
    fn set_cached_writes_the_states_bytes_only() {
        let mut seed = 0x1234_5679;
        for round in 0..3000 {
            let mut states = || match round {
                0 => 0,
                1 => (1 << CARD_STATES) - 1,
                _ => xorshift(&mut seed) & ((1 << CARD_STATES) - 1),
            };
            let (first, second) = (states(), states());
            let (byte, other) = (xorshift(&mut seed) as u8, xorshift(&mut seed) as u8);
            let before: [u8; CARD_STATES] = std::array::from_fn(|_| xorshift(&mut seed) as u8);
            let mut got = before;
            set_cached(&mut got, [(first, byte)]);
            let expected: [u8; CARD_STATES] =
                std::array::from_fn(|k| if first >> k & 1 != 0 { byte } else { before[k] });
            assert_eq!(got, expected, "states {first:#x}");
            let mut got = before;
            set_cached(&mut got, [(first, byte), (second, other)]);
            let expected: [u8; CARD_STATES] = std::array::from_fn(|k| match (first >> k & 1, second >> k & 1) {
                (_, 1) => other,
                (1, _) => byte,
                _ => before[k],
            });
            assert_eq!(got, expected, "states {first:#x} then {second:#x}");
        }
    }

    /// Setting every byte then some states' writes exactly those bytes,
    /// whatever the bytes were.
    #[test]
    fn set_all_writes_every_byte() {
        let mut seed = 0x2345_6781;
        for _ in 0..3000 {
            let mask = (1 << CARD_STATES) - 1;
            let (first, second) = (xorshift(&mut seed) & mask, xorshift(&mut seed) & mask);
            let [base, byte, other] = [0; 3].map(|_: u8| xorshift(&mut seed) as u8);
            let mut got: [u8; CARD_STATES] = std::array::from_fn(|_| xorshift(&mut seed) as u8);
            set_all(&mut got, base, [(first, byte), (second, other)]);
            let expected: [u8; CARD_STATES] = std::array::from_fn(|k| match (first >> k & 1, second >> k & 1) {
                (_, 1) => other,
                (1, _) => byte,
                _ => base,
            });
            assert_eq!(got, expected, "base {base}, states {first:#x} then {second:#x}");
        }
    }

    /// The states holding a byte are those whose byte it is, for bytes
    /// of a small alphabet (so that most bytes repeat) and for every byte
    /// (the debug check inside compares with the scalar loop; this with
    /// a third).
    #[test]
    fn states_holding_a_byte_are_those_with_it() {
        let mut seed = 0x2545_f491;
        for round in 0..2000 {
            let values: [u8; CARD_STATES] = std::array::from_fn(|_| {
                if round % 2 == 0 { xorshift(&mut seed) as u8 % 4 } else { xorshift(&mut seed) as u8 }
            });
            let byte = xorshift(&mut seed) as u8 % if round % 2 == 0 { 5 } else { 255 };
            let expected = (0..CARD_STATES).filter(|&k| values[k] == byte).fold(0, |set, k| set | 1 << k);
            assert_eq!(states_holding(&values, byte), expected, "values {values:?}, byte {byte}");
        }
        assert_eq!(states_holding(&[7; CARD_STATES], 7), (1 << CARD_STATES) - 1);
    }

    /// A permutation moves every byte where it says, for random
    /// permutations and bytes; a repeated source is refused.
    #[test]
    fn permutations_move_each_byte_where_they_say() {
        let mut seed = 0x9e37_79b9;
        for _ in 0..500 {
            let mut from: [u8; CARD_STATES] = std::array::from_fn(|k| k as u8);
            for k in (1..CARD_STATES).rev() {
                from.swap(k, xorshift(&mut seed) as usize % (k + 1));
            }
            let permutation = Permutation::new(from);
            let values: [u8; CARD_STATES] = std::array::from_fn(|_| xorshift(&mut seed) as u8);
            let mut out = [0; CARD_STATES];
            permutation.apply(&values, &mut out);
            for j in 0..CARD_STATES {
                assert_eq!(out[j], values[from[j] as usize]);
            }
        }
        let mut twice: [u8; CARD_STATES] = std::array::from_fn(|k| k as u8);
        twice[3] = 4;
        assert!(std::panic::catch_unwind(|| Permutation::new(twice)).is_err());
    }
}

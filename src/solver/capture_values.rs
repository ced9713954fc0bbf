//! Folding captures' values into one layout's value bytes: for every card
//! state holding a card of a capture, the best of its current byte and the
//! negated byte of the successor it reaches.
//!
//! Owns only that byte arithmetic (the scalar definition, and on x86_64 a
//! version that works on all 30 card states at once with byte shuffles).
//! It knows nothing of moves, boards or lanes: the caller finds each
//! capture's successor bytes and cards (`kernel::fold_captures`).

use super::layout_bytes::HIGH_START;
#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
use super::layout_bytes::{load, store};
use crate::rules::{CARD_STATES, CARDS_PER_GAME, CardState, CardTables};
use crate::value;

/// How card states find their successor's byte after playing one card slot.
#[derive(Clone, Copy)]
pub(super) struct CaptureValues {
    // The scalar definition's tables (optimised x86_64 builds fold bytes
    // with the shuffles only, and words with these).
    /// `after[k][c]`: card state after playing slot c from state k
    /// (`u8::MAX` if k does not hold c).
    after: [[u8; CARDS_PER_GAME]; CARD_STATES],
    /// States in which the mover holds card slot c.
    holds: [u32; CARDS_PER_GAME],
    /// Per card slot, the byte shuffles of the vector fold.
    #[cfg_attr(not(all(target_arch = "x86_64", target_feature = "ssse3")), allow(dead_code))]
    shuffles: [SlotShuffle; CARDS_PER_GAME],
}

/// The successor states of a move with card slot c are the six of group c
/// (bytes 6c..6c+6 of the successor's 30). The vector fold loads 16 bytes
/// from `window_start` (which holds those six and stays inside the 30) and
/// spreads them, negated, over the holding states with two shuffles: one
/// for states 0..16, one for states 14..30 (the halves overlap so that
/// both are whole 16-byte loads and stores inside the layout's bytes).
#[derive(Clone, Copy, Default)]
struct SlotShuffle {
    window_start: usize,
    /// Byte i: where state i's successor byte is in the window, or 0x80
    /// (a zero, which no byte is below) if state i does not hold the slot.
    low: [u8; 16],
    /// The same for state `HIGH_START + i`.
    high: [u8; 16],
}

/// A shuffle index that makes a zero byte.
const ZERO_BYTE: u8 = 0x80;

impl CaptureValues {
    pub fn new() -> CaptureValues {
        let mut after = [[u8::MAX; CARDS_PER_GAME]; CARD_STATES];
        for k in CardState::all() {
            for slot in k.mover_cards() {
                after[k.index()][slot] = k.after_playing(slot).index() as u8;
            }
        }
        let holds = CardTables::new().holds;
        let shuffles = std::array::from_fn(|slot| {
            let window_start = (6 * slot).min(HIGH_START);
            let index = |k: usize| {
                if holds[slot] >> k & 1 == 0 {
                    return ZERO_BYTE;
                }
                let at = after[k][slot] as usize;
                assert!((window_start..window_start + 16).contains(&at), "a successor state outside its window");
                (at - window_start) as u8
            };
            SlotShuffle {
                window_start,
                low: std::array::from_fn(index),
                high: std::array::from_fn(|i| index(HIGH_START + i)),
            }
        });
        CaptureValues { after, holds, shuffles }
    }

    /// Folds captures into a layout's bytes: for each `(successor, cards)`
    /// (the successor layout's 30 bytes, the capture's card slots), every
    /// state k holding a slot c of `cards` takes
    /// `max(values[k], negate(successor[after[k][c]]))`.
    /// Successor bytes reached must have a value and not be a win in 253
    /// plies (as [`value::negate`]).
    #[inline(always)]
    pub fn fold<'s>(&self, values: &mut [u8], captures: impl Iterator<Item = (&'s [u8], u8)> + Clone) {
        let values: &mut [u8; CARD_STATES] = values.try_into().expect("a layout has 30 value bytes");
        #[cfg(debug_assertions)]
        let expected = {
            let mut expected = *values;
            self.fold_scalar(&mut expected, captures.clone());
            expected
        };
        #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
        // SAFETY: the only requirement of a `target_feature` function is
        // that the CPU has the feature, and this build assumes it for every
        // function (the `cfg` above: `.cargo/config.toml` builds for
        // x86-64-v3, which has SSSE3, and `main` checks the CPU has it).
        unsafe {
            self.fold_vector(values, captures)
        };
        #[cfg(not(all(target_arch = "x86_64", target_feature = "ssse3")))]
        self.fold_scalar(values, captures);
        #[cfg(debug_assertions)]
        debug_assert_eq!(*values, expected, "the vector fold agrees with the scalar definition");
    }

    /// [`Self::fold`] on value words: `values` and each successor hold 30
    /// little-endian words. A state at a time: word tables are few, and
    /// the fast path is the bytes'.
    pub fn fold_words<'s>(&self, values: &mut [u8], captures: impl Iterator<Item = (&'s [u8], u8)>) {
        debug_assert_eq!(values.len(), 2 * CARD_STATES);
        self.for_each_state(captures, |k, successor, at| {
            let mine = value::negate_word(value::word_at(successor, at));
            if mine > value::word_at(values, k) {
                value::set_word_at(values, k, mine);
            }
        });
    }

    /// The definition, a state at a time (checks each byte it negates).
    #[cfg_attr(all(target_arch = "x86_64", target_feature = "ssse3", not(debug_assertions)), allow(dead_code))]
    fn fold_scalar<'s>(&self, values: &mut [u8; CARD_STATES], captures: impl Iterator<Item = (&'s [u8], u8)>) {
        self.for_each_state(captures, |k, successor, at| values[k] = values[k].max(value::negate(successor[at])));
    }

    /// For each capture and each state k holding one of its cards:
    /// `fold(k, successor, successor's state)`.
    fn for_each_state<'s>(
        &self,
        captures: impl Iterator<Item = (&'s [u8], u8)>,
        mut fold: impl FnMut(usize, &'s [u8], usize),
    ) {
        for (successor, cards) in captures {
            for slot in 0..CARDS_PER_GAME {
                if cards >> slot & 1 == 0 {
                    continue;
                }
                let mut states = self.holds[slot];
                while states != 0 {
                    let k = states.trailing_zeros() as usize;
                    states &= states - 1;
                    fold(k, successor, self.after[k][slot] as usize);
                }
            }
        }
    }

    /// All 30 states at once: per capture and card slot, one 16-byte load,
    /// a negation, two shuffles and two byte maxima.
    #[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
    #[target_feature(enable = "ssse3")]
    #[inline]
    fn fold_vector<'s>(&self, values: &mut [u8; CARD_STATES], captures: impl Iterator<Item = (&'s [u8], u8)>) {
        use std::arch::x86_64::*;
        let (mut low, mut high) = (load(&values[..16]), load(&values[HIGH_START..]));
        let zero = _mm_setzero_si128();
        let above_draw = _mm_set1_epi8(value::DRAW as i8 + 1);
        for (successor, cards) in captures {
            let mut rest = cards;
            while rest != 0 {
                let slot = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let shuffle = &self.shuffles[slot];
                let bytes = load(&successor[shuffle.window_start..shuffle.window_start + 16]);
                // negate: 256 - b for a loss or a draw, 257 - b for a win
                // (b > 128): -b, plus one where b is a win (the mask is -1).
                let win = _mm_cmpeq_epi8(_mm_max_epu8(bytes, above_draw), bytes);
                let negated = _mm_sub_epi8(_mm_sub_epi8(zero, bytes), win);
                low = _mm_max_epu8(low, _mm_shuffle_epi8(negated, load(&shuffle.low)));
                high = _mm_max_epu8(high, _mm_shuffle_epi8(negated, load(&shuffle.high)));
            }
        }
        // Both halves hold the same maxima for the states they share.
        store(high, &mut values[HIGH_START..]);
        store(low, &mut values[..16]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::CardTables;

    /// A pseudo-random byte that `negate` accepts (no 0, no 129).
    fn valued_byte(seed: &mut u64) -> u8 {
        loop {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let byte = (*seed >> 56) as u8;
            if byte != 0 && byte != 129 {
                return byte;
            }
        }
    }

    /// The vector fold (in `fold`) against the scalar definition, over
    /// every card set of captures and bytes of every kind (losses, the
    /// draw, wins), with and without states that already have a value.
    #[test]
    fn vector_fold_matches_the_definition() {
        let fold = CaptureValues::new();
        let mut seed = 7;
        for round in 0..2000 {
            let successors: Vec<[u8; CARD_STATES]> =
                (0..3).map(|_| std::array::from_fn(|_| valued_byte(&mut seed))).collect();
            let cards: Vec<u8> = (0..3).map(|i| ((round * 7 + i * 13) % 32) as u8).collect();
            let start: [u8; CARD_STATES] =
                std::array::from_fn(|_| if round % 2 == 0 { 0 } else { valued_byte(&mut seed) });
            let captures = successors.iter().zip(&cards).map(|(s, &c)| (&s[..], c));
            let mut expected = start;
            fold.fold_scalar(&mut expected, captures.clone());
            let mut got = start;
            fold.fold(&mut got, captures);
            assert_eq!(got, expected, "round {round}");
        }
    }

    /// Spot checks of the definition itself: a successor lost in 4 makes a
    /// win in 5 for the states holding the card, and no others change.
    #[test]
    fn a_lost_successor_makes_a_win_for_the_holding_states() {
        let fold = CaptureValues::new();
        let loss4 = value::Value::Loss(4).to_byte();
        let win5 = value::Value::Win(5).to_byte();
        let successor = [loss4; CARD_STATES];
        let mut values = [0u8; CARD_STATES];
        fold.fold(&mut values, std::iter::once((&successor[..], 0b00100)));
        let holds = CardTables::new().holds[2];
        for (k, &byte) in values.iter().enumerate() {
            assert_eq!(byte, if holds >> k & 1 != 0 { win5 } else { 0 }, "state {k}");
        }
    }
}

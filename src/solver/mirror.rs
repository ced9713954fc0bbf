//! The left-right mirror of a mirror-closed card set.
//!
//! Where a set holds, for each of its cards, the card whose offsets are its
//! own with left and right swapped (the default set does: Ox and Horse are
//! each other's, Boar, Elephant and Crab their own; 328 of the 4368 sets
//! are such), a position and its mirror image (columns reversed, every card
//! replaced by its image) have the same value. A step then solves
//! one placement of each mirror pair and writes the other's words from it:
//! about half the placements (all but 0.06% of 3v3's have an image other
//! than themselves).
//!
//! Owns which sets are mirror-closed, the card-state permutation and the
//! mirror of squares and boards. Knows nothing of lanes or steps.

use super::layout_bytes::Permutation;
use crate::index::Group;
use crate::rules::{CARD_STATES, CARDS_PER_GAME, CardSet, CardState};

/// Square `square` mirrored: same row, column 4 - column. By table: the
/// steps mirror both masters' squares of every layout they decide, and
/// the arithmetic (two remainders by 5) was about 0.9% of a 6-men run's
/// instructions.
#[inline(always)]
pub(super) fn square(square: u8) -> u8 {
    const MIRRORED: [u8; 32] = {
        let mut table = [0u8; 32];
        let mut square = 0;
        while square < 25 {
            table[square] = (square - square % 5 + (4 - square % 5)) as u8;
            square += 1;
        }
        table
    };
    debug_assert!(square < 25);
    MIRRORED[square as usize & 31]
}

/// A board (bit per square) mirrored: columns 0 and 4 swap places, and
/// 1 and 3, each a shift of every row at once (a table lookup per row was
/// about 6% of a 4-men run's instructions: the steps mirror every
/// placement they walk).
#[inline(always)]
pub(super) fn board(board: u32) -> u32 {
    ((board & COLUMN[0]) << 4)
        | ((board & COLUMN[4]) >> 4)
        | ((board & COLUMN[1]) << 2)
        | ((board & COLUMN[3]) >> 2)
        | (board & COLUMN[2])
}

/// The ordinal (in square order) of the image of the piece on `square` on
/// the image of `board`: the pieces of `board` whose images come before
/// the image of `square` (rows below it, and its row's squares to its
/// right). Mirroring the board first took two board mirrors per visit of
/// a mirroring step, which seldom decides anything.
#[inline(always)]
pub(super) fn image_ordinal(board: u32, square: u8) -> usize {
    // By square: the squares whose images come before its image.
    const BEFORE_IMAGE: [u32; 32] = {
        let mut table = [0u32; 32];
        let mut square = 0;
        while square < 25 {
            let (row, column) = (square / 5, square % 5);
            let right_of = ((1u32 << 5) - (1 << (column + 1))) << (5 * row);
            table[square] = ((1u32 << (5 * row)) - 1) | right_of;
            square += 1;
        }
        table
    };
    debug_assert!(square < 25);
    (board & BEFORE_IMAGE[square as usize & 31]).count_ones() as usize
}

/// The squares of each column.
const COLUMN: [u32; 5] = {
    let mut columns = [0u32; 5];
    let mut square = 0;
    while square < 25 {
        columns[square % 5] |= 1 << square;
        square += 1;
    }
    columns
};

/// The number, in its group, of the mirror image of the placement with
/// these boards (the image lies in the same group: the mirror keeps every
/// row's counts), or `None` if the placement is its own image.
#[inline(always)]
pub(super) fn image_number(group: &Group, mover: u32, opponent: u32) -> Option<u64> {
    let (image_mover, image_opponent) = (board(mover), board(opponent));
    ((image_mover, image_opponent) != (mover, opponent)).then(|| group.placement_number(image_mover, image_opponent))
}

/// Is placement `placement` of `group` (with these boards) the image of
/// one that comes before it, so that a mirroring step does not solve it?
#[inline(always)]
pub(super) fn is_image(group: &Group, placement: u64, mover: u32, opponent: u32) -> bool {
    image_number(group, mover, opponent).is_some_and(|image| image < placement)
}

/// The card-state permutation of a mirror-closed set, as tables that turn
/// a word of card states (bit k = state k) into the word of their images.
pub(super) struct Mirror {
    /// By byte of the word (0 lowest) and its value: the images' bits.
    states_by_byte: [[u32; 256]; 4],
    /// A layout's value bytes to its image's: the byte of state k goes
    /// to the image of k.
    to_image: Permutation,
}

impl Mirror {
    /// The mirror of `cards`, or `None` if some card's image is not in the
    /// set.
    pub fn of(cards: &CardSet) -> Option<Mirror> {
        let offsets = |slot: usize, turn: i8| {
            let mut offsets: Vec<(i8, i8)> = cards.card(slot).offsets.iter().map(|&(dx, dy)| (turn * dx, dy)).collect();
            offsets.sort_unstable();
            offsets
        };
        let mut slots = [0; CARDS_PER_GAME];
        for (slot, image) in slots.iter_mut().enumerate() {
            *image = (0..CARDS_PER_GAME).find(|&other| offsets(other, 1) == offsets(slot, -1))?;
        }
        let image_of = |state: CardState| {
            let (mover, opponent) = (state.mover_cards(), state.opponent_cards());
            CardState::from_hands(
                [slots[mover[0]], slots[mover[1]]],
                [slots[opponent[0]], slots[opponent[1]]],
                slots[state.side()],
            )
            .expect("the images of five different cards are five different cards")
        };
        let mut states_by_byte = [[0u32; 256]; 4];
        for (byte, table) in states_by_byte.iter_mut().enumerate() {
            for (value, images) in table.iter_mut().enumerate() {
                for bit in 0..8 {
                    let k = 8 * byte + bit;
                    if value >> bit & 1 != 0 && k < CARD_STATES {
                        *images |= 1 << image_of(CardState::new(k)).index();
                    }
                }
            }
        }
        // The image's byte j is the byte of the state whose image is j.
        let mut from = [0u8; CARD_STATES];
        for k in CardState::all() {
            from[image_of(k).index()] = k.index() as u8;
        }
        Some(Mirror { states_by_byte, to_image: Permutation::new(from) })
    }

    /// A layout's value bytes (one per card state) as its image's: the
    /// byte of state k goes to the image of k.
    #[inline(always)]
    pub fn values(&self, values: &[u8], image: &mut [u8]) {
        let (values, image): (&[u8; CARD_STATES], &mut [u8; CARD_STATES]) =
            (values.try_into().expect("a layout's bytes"), image.try_into().expect("a layout's bytes"));
        self.to_image.apply(values, image);
    }

    /// [`Self::values`] for a layout's 30 little-endian value words.
    pub fn value_words(&self, values: &[u8], image: &mut [u8]) {
        self.to_image.apply_words(values, image);
    }

    /// The images of the card states in `word`.
    #[inline(always)]
    pub fn states(&self, word: u32) -> u32 {
        let t = &self.states_by_byte;
        t[0][(word & 255) as usize]
            | t[1][(word >> 8 & 255) as usize]
            | t[2][(word >> 16 & 255) as usize]
            | t[3][(word >> 24) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::ALL_CARD_STATES;

    #[test]
    fn boards_and_squares_mirror_alike() {
        for s in 0..25u8 {
            assert_eq!(square(square(s)), s);
            assert_eq!(board(1 << s), 1 << square(s));
        }
        assert_eq!(board(0b11111), 0b11111);
        assert_eq!(board(0b00011 << 10), 0b11000 << 10);
        // Square by square, on boards of every density.
        for b in random_boards(0x9e37_79b9) {
            let by_square = (0..25u8).filter(|&s| b >> s & 1 != 0).fold(0, |out, s| out | 1 << square(s));
            assert_eq!(board(b), by_square);
        }
    }

    /// A thousand boards of 25 squares, from a xorshift of `seed`.
    fn random_boards(mut seed: u32) -> impl Iterator<Item = u32> {
        (0..1000).map(move |_| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed & ((1 << 25) - 1)
        })
    }

    #[test]
    fn image_ordinals_count_on_the_mirrored_board() {
        for b in random_boards(0x2545_f491) {
            for s in (0..25u8).filter(|&s| b >> s & 1 != 0) {
                let image = square(s);
                assert_eq!(image_ordinal(b, s), (board(b) & ((1 << image) - 1)).count_ones() as usize, "{b:#x} {s}");
            }
        }
    }

    #[test]
    fn only_closed_sets_have_a_mirror_and_it_is_an_involution() {
        let default = Mirror::of(&CardSet::default_set()).expect("the default set is mirror-closed");
        let moved = (0..CARD_STATES).filter(|&k| default.states(1 << k) != 1 << k).count();
        // Ox and Horse swap: every state that holds one of them moves.
        assert!(moved > 0 && moved < CARD_STATES, "{moved}");
        for k in 0..CARD_STATES {
            assert_eq!(default.states(default.states(1 << k)), 1 << k);
            assert_eq!(default.states(1 << k).count_ones(), 1);
        }
        assert_eq!(default.states(ALL_CARD_STATES), ALL_CARD_STATES);
        // Value bytes move as the states' bits do.
        let values: Vec<u8> = (0..CARD_STATES as u8).collect();
        let mut image = vec![0u8; CARD_STATES];
        default.values(&values, &mut image);
        for k in 0..CARD_STATES {
            assert_eq!(1 << image.iter().position(|&b| b == k as u8).unwrap(), default.states(1 << k));
        }
        assert!(Mirror::of(&CardSet::from_names(&["Boar", "Ox", "Elephant", "Tiger", "Crab"]).unwrap()).is_none());
    }
}

//! Game values and their one- and two-byte encodings in value tables.
//!
//! Owns the encodings only; knows nothing of positions or storage.
//!
//! A value byte is ordered by how good it is for the side to move, so the
//! best move is the one with the largest negated successor byte:
//!
//! | byte      | value                          |
//! |-----------|--------------------------------|
//! | 0         | no value: not a position       |
//! | 1..=127   | loss in 2 * (byte - 1) plies   |
//! | 128       | draw                           |
//! | 129..=255 | win in 2 * (255 - byte) + 1    |
//!
//! Wins take an odd number of plies and losses an even one, so the byte loses
//! nothing. The deepest loss it holds is 252 plies. Tables that go deeper
//! (a few card sets: README, "Limits") hold a value word per state instead,
//! a little-endian `u16` in the same order:
//!
//! | word            | value                          |
//! |-----------------|--------------------------------|
//! | 0               | no value: not a position       |
//! | 1..=32767       | loss in 2 * (word - 1) plies   |
//! | 32768           | draw                           |
//! | 32769..=65535   | win in 2 * (65535 - word) + 1  |
//!
//! so that a byte widens to the word of the same value by [`widen`]: a loss
//! keeps its number, a draw is 32768, a win byte b is b + 0xFF00.

use std::fmt;

/// Value byte of positions that are not in the table (game over).
pub const NO_VALUE: u8 = 0;
pub const DRAW: u8 = 128;
/// Deepest loss a value byte can hold.
pub const MAX_LOSS_PLIES: u16 = 252;
/// Deepest win a value byte can hold.
pub const MAX_WIN_PLIES: u16 = 253;
/// The value word of a draw.
pub const DRAW_WORD: u16 = 0x8000;
/// Deepest loss a value word can hold: 2 * (32767 - 1).
pub const MAX_LOSS_PLIES_WORD: u16 = 65532;

/// Bytes a table stores per (layout, card state): one value byte, or a
/// value word where some loss is deeper than [`MAX_LOSS_PLIES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ValueWidth {
    #[default]
    Byte,
    Word,
}

impl ValueWidth {
    /// Bytes per state: 1 or 2.
    pub const fn bytes(self) -> usize {
        match self {
            ValueWidth::Byte => 1,
            ValueWidth::Word => 2,
        }
    }

    /// Deepest loss this width holds, in plies.
    pub const fn max_loss_plies(self) -> u16 {
        match self {
            ValueWidth::Byte => MAX_LOSS_PLIES,
            ValueWidth::Word => MAX_LOSS_PLIES_WORD,
        }
    }

    /// The value of the state at `state` (a state number, not a byte
    /// offset) of `values` stored at this width, `None` for no value.
    #[inline]
    pub fn value_at(self, values: &[u8], state: usize) -> Option<Value> {
        self.decode(self.code_at(values, state))
    }

    /// What this width stores for `value`: the byte (as a `u16`) or the
    /// word. Codes of one width compare as their values do.
    /// # Panics: as [`Value::to_byte`] or [`Value::to_word`].
    #[inline]
    pub fn encode(self, value: Value) -> u16 {
        match self {
            ValueWidth::Byte => value.to_byte() as u16,
            ValueWidth::Word => value.to_word(),
        }
    }

    /// The value of a code of this width ([`Self::encode`]), `None` for no
    /// value.
    #[inline]
    pub fn decode(self, code: u16) -> Option<Value> {
        match self {
            ValueWidth::Byte => Value::from_byte(code as u8),
            ValueWidth::Word => Value::from_word(code),
        }
    }

    /// The code stored for the state at `state` of `values`.
    #[inline(always)]
    pub fn code_at(self, values: &[u8], state: usize) -> u16 {
        match self {
            ValueWidth::Byte => values[state] as u16,
            ValueWidth::Word => word_at(values, state),
        }
    }

    /// Stores `code` for the state at `state` of `values`.
    #[inline(always)]
    pub fn set_code_at(self, values: &mut [u8], state: usize, code: u16) {
        match self {
            ValueWidth::Byte => values[state] = code as u8,
            ValueWidth::Word => set_word_at(values, state, code),
        }
    }

    /// The value word of the state at `state` of `values` stored at this
    /// width (a byte is widened).
    #[inline]
    pub fn word_at(self, values: &[u8], state: usize) -> u16 {
        match self {
            ValueWidth::Byte => widen(values[state]),
            ValueWidth::Word => word_at(values, state),
        }
    }
}

/// The `state`-th little-endian value word of `values`.
#[inline(always)]
pub fn word_at(values: &[u8], state: usize) -> u16 {
    u16::from_le_bytes([values[2 * state], values[2 * state + 1]])
}

/// Stores `word` as the `state`-th little-endian value word of `values`.
#[inline(always)]
pub fn set_word_at(values: &mut [u8], state: usize, word: u16) {
    values[2 * state..2 * state + 2].copy_from_slice(&word.to_le_bytes());
}

/// The value word of the value that `byte` encodes.
#[inline]
pub const fn widen(byte: u8) -> u16 {
    match byte {
        0..=127 => byte as u16,
        DRAW => DRAW_WORD,
        _ => byte as u16 + 0xFF00,
    }
}

/// The value byte of the value that `word` encodes, `None` if no byte
/// holds it (the inverse of [`widen`]).
#[inline]
pub const fn narrow(word: u16) -> Option<u8> {
    match word {
        0..=127 => Some(word as u8),
        DRAW_WORD => Some(DRAW),
        0xFF81..=0xFFFF => Some((word - 0xFF00) as u8),
        _ => None,
    }
}

/// [`negate`] for value words: the word of a position whose successor (seen
/// by the opponent) has value word `successor`.
/// # Panics: on no value, or a win too deep to answer with a loss word.
#[inline]
pub const fn negate_word(successor: u16) -> u16 {
    match successor {
        0 => panic!("successor without a value"),
        1..=0x7FFF => 0u16.wrapping_sub(successor),
        DRAW_WORD => DRAW_WORD,
        _ => {
            assert!(successor > 0x8001, "the deepest win cannot be answered by a loss word");
            1u16.wrapping_sub(successor)
        }
    }
}

/// Result for the side to move, with plies to the end of the game under best
/// play (the winner hurries, the loser delays).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Win(u16),
    Loss(u16),
    Draw,
}

impl Value {
    /// The value byte. # Panics: on plies a byte cannot hold (odd losses,
    /// even wins, beyond the maximum): the solver never makes those.
    pub fn to_byte(self) -> u8 {
        match self {
            Value::Win(plies) => {
                assert!(plies % 2 == 1 && plies <= MAX_WIN_PLIES, "win in {plies} plies has no value byte");
                255 - ((plies - 1) / 2) as u8
            }
            Value::Loss(plies) => {
                assert!(plies % 2 == 0 && plies <= MAX_LOSS_PLIES, "loss in {plies} plies has no value byte");
                1 + (plies / 2) as u8
            }
            Value::Draw => DRAW,
        }
    }

    /// The value word. # Panics: on plies a word cannot hold (odd losses,
    /// even wins, beyond the maximum).
    pub fn to_word(self) -> u16 {
        match self {
            Value::Win(plies) => {
                assert!(plies % 2 == 1 && plies <= MAX_LOSS_PLIES_WORD + 1, "win in {plies} plies has no value word");
                u16::MAX - (plies - 1) / 2
            }
            Value::Loss(plies) => {
                assert!(plies % 2 == 0 && plies <= MAX_LOSS_PLIES_WORD, "loss in {plies} plies has no value word");
                1 + plies / 2
            }
            Value::Draw => DRAW_WORD,
        }
    }

    /// The value of a word, `None` for no value (0).
    pub fn from_word(word: u16) -> Option<Value> {
        match word {
            0 => None,
            1..=0x7FFF => Some(Value::Loss(2 * (word - 1))),
            DRAW_WORD => Some(Value::Draw),
            _ => Some(Value::Win(2 * (u16::MAX - word) + 1)),
        }
    }

    /// The value of a byte, `None` for [`NO_VALUE`].
    pub fn from_byte(byte: u8) -> Option<Value> {
        match byte {
            NO_VALUE => None,
            1..=127 => Some(Value::Loss(2 * (byte as u16 - 1))),
            DRAW => Some(Value::Draw),
            _ => Some(Value::Win(2 * (255 - byte as u16) + 1)),
        }
    }

    pub fn plies(self) -> Option<u16> {
        match self {
            Value::Win(p) | Value::Loss(p) => Some(p),
            Value::Draw => None,
        }
    }

    pub fn is_win(self) -> bool {
        matches!(self, Value::Win(_))
    }

    pub fn is_loss(self) -> bool {
        matches!(self, Value::Loss(_))
    }

    /// The value, for the side that moved, of a move into a position of
    /// this value (for the side to move there): one ply more, sides swapped.
    pub fn before_move(self) -> Value {
        match self {
            Value::Win(p) => Value::Loss(p + 1),
            Value::Loss(p) => Value::Win(p + 1),
            Value::Draw => Value::Draw,
        }
    }

    /// Orders values by how good they are for the side to move (larger is
    /// better), for any number of plies.
    pub fn goodness(self) -> i32 {
        match self {
            Value::Loss(p) => p as i32 - 100_000,
            Value::Draw => 0,
            Value::Win(p) => 100_000 - p as i32,
        }
    }

    /// "win", "draw" or "loss".
    pub fn wdl_name(self) -> &'static str {
        match self {
            Value::Win(_) => "win",
            Value::Draw => "draw",
            Value::Loss(_) => "loss",
        }
    }
}

/// The byte of a position whose successor (seen by the opponent) has value
/// byte `successor`: one ply further from the end, sides swapped.
/// # Panics: on [`NO_VALUE`] or a win too deep to answer with a loss byte.
#[inline]
pub const fn negate(successor: u8) -> u8 {
    match successor {
        NO_VALUE => panic!("successor without a value"),
        1..=127 => 256u16.wrapping_sub(successor as u16) as u8,
        DRAW => DRAW,
        _ => {
            assert!(successor > 129, "win in 253 plies cannot be answered by a loss byte");
            (257 - successor as u16) as u8
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Win(p) => write!(f, "win in {p}"),
            Value::Loss(p) => write!(f, "loss in {p}"),
            Value::Draw => write!(f, "draw"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_and_order_means_better() {
        let mut last: Option<Value> = None;
        for byte in 1..=255u8 {
            let value = Value::from_byte(byte).unwrap();
            assert_eq!(value.to_byte(), byte);
            if let Some(prev) = last {
                // Larger bytes are better for the mover.
                let rank = |v: Value| match v {
                    Value::Loss(p) => p as i32 - 1000,
                    Value::Draw => 0,
                    Value::Win(p) => 1000 - p as i32,
                };
                assert!(rank(value) > rank(prev));
            }
            last = Some(value);
        }
    }

    #[test]
    fn negation_adds_one_ply_and_swaps_sides() {
        assert_eq!(negate(Value::Loss(0).to_byte()), Value::Win(1).to_byte());
        assert_eq!(negate(Value::Win(1).to_byte()), Value::Loss(2).to_byte());
        assert_eq!(negate(Value::Loss(250).to_byte()), Value::Win(251).to_byte());
        assert_eq!(negate(Value::Win(251).to_byte()), Value::Loss(252).to_byte());
        assert_eq!(negate(DRAW), DRAW);
    }

    #[test]
    fn words_round_trip_keep_the_order_and_widen_bytes() {
        let mut last: Option<Value> = None;
        for word in 1..=u16::MAX {
            let value = Value::from_word(word).unwrap();
            assert_eq!(value.to_word(), word);
            if let Some(prev) = last {
                assert!(value.goodness() > prev.goodness(), "word {word}");
            }
            last = Some(value);
        }
        assert_eq!(widen(NO_VALUE), 0);
        for byte in 1..=u8::MAX {
            assert_eq!(Value::from_word(widen(byte)), Value::from_byte(byte), "byte {byte}");
        }
        for word in 0..=u16::MAX {
            let fits = Value::from_word(word).is_none_or(|v| v.plies().is_none_or(|p| p <= MAX_WIN_PLIES));
            assert_eq!(narrow(word).map(widen), fits.then_some(word), "word {word}");
        }
        let mut bytes = [0u8; 6];
        set_word_at(&mut bytes, 1, 0xABCD);
        assert_eq!((bytes, word_at(&bytes, 1)), ([0, 0, 0xCD, 0xAB, 0, 0], 0xABCD));
        assert_eq!(ValueWidth::Word.value_at(&bytes, 1), Value::from_word(0xABCD));
        assert_eq!(ValueWidth::Byte.word_at(&bytes, 2), widen(0xCD));
        for width in [ValueWidth::Byte, ValueWidth::Word] {
            for value in [Value::Loss(0), Value::Loss(252), Value::Draw, Value::Win(1), Value::Win(253)] {
                let mut values = [0u8; 4];
                width.set_code_at(&mut values, 1, width.encode(value));
                assert_eq!((width.decode(width.encode(value)), width.value_at(&values, 1)), (Some(value), Some(value)));
            }
        }
    }

    #[test]
    fn word_negation_is_the_value_one_ply_earlier() {
        for word in 1..=u16::MAX {
            let value = Value::from_word(word).unwrap();
            if value == Value::Win(MAX_LOSS_PLIES_WORD + 1) {
                continue;
            }
            assert_eq!(Value::from_word(negate_word(word)), Some(value.before_move()), "word {word}");
        }
        for byte in 1..=u8::MAX {
            if byte != 129 {
                assert_eq!(widen(negate(byte)), negate_word(widen(byte)), "byte {byte}");
            }
        }
    }
}

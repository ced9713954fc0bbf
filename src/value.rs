//! Game values and their one-byte encoding in value tables.
//!
//! Owns the byte encoding only; knows nothing of positions or storage.
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
//! nothing. The deepest loss it holds is 252 plies; the solver refuses to go
//! deeper instead of wrapping around.

use std::fmt;

/// Value byte of positions that are not in the table (game over).
pub const NO_VALUE: u8 = 0;
pub const DRAW: u8 = 128;
/// Deepest loss a value byte can hold.
pub const MAX_LOSS_PLIES: u16 = 252;
/// Deepest win a value byte can hold.
pub const MAX_WIN_PLIES: u16 = 253;

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
}

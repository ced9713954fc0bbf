//! Position notation: reading and writing positions as text, and drawing
//! the board.
//!
//! Owns the text forms a user types and reads; converts between the board
//! as players see it (Red at the bottom, Blue at the top) and `Position`
//! (seen from the side to move). Knows card names only through a `CardSet`.
//!
//! Notation (README, "Position notation"): five fields separated by spaces,
//!
//! ```text
//! 1bBb1/5/5/5/1rRr1 r Boar,Ox Crab,Horse Elephant
//! ```
//!
//! 1. the board, top row (Blue's home row) first, rows separated by `/`:
//!    `R` Red's master, `r` a Red student, `B` Blue's master, `b` a Blue
//!    student, a digit 1-5 for that many empty squares, or `.` for one;
//! 2. the side to move: `r` (Red) or `b` (Blue);
//! 3. Red's two cards, 4. Blue's two cards, comma-separated, 5. the side
//!    card. Card names ignore case.
//!
//! Red moves up the diagram and wins on square c5 (Blue's temple); Blue
//! moves down and wins on c1. Squares are named a1..e5: columns a-e from
//! left to right, rows 1-5 from the bottom.

use crate::rules::{CardSet, CardState, MAX_PIECES_PER_SIDE, Move, Position, SQUARES, rotate, rotate_square};
use std::fmt;
use thiserror::Error;

/// A side, by colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Colour {
    Red,
    Blue,
}

impl Colour {
    pub fn other(self) -> Colour {
        match self {
            Colour::Red => Colour::Blue,
            Colour::Blue => Colour::Red,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Colour::Red => "red",
            Colour::Blue => "blue",
        }
    }
}

impl fmt::Display for Colour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A position with the colour of the side to move, so that it can be shown
/// the way the players see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Setup {
    pub to_move: Colour,
    pub position: Position,
}

/// A notation that could not be read: what is wrong and where (1-based
/// character column in the text).
#[derive(Debug, Error, PartialEq, Eq)]
#[error("position notation, column {column}: {problem}")]
pub struct NotationError {
    pub column: usize,
    pub problem: String,
}

/// A board square as Red sees it (Red's square numbering: row 0 = bottom).
fn red_square(row_from_top: usize, col: usize) -> u8 {
    (5 * (4 - row_from_top) + col) as u8
}

/// The square in the mover's numbering of a square in Red's numbering.
fn mover_square(red: u8, to_move: Colour) -> u8 {
    match to_move {
        Colour::Red => red,
        Colour::Blue => rotate_square(red),
    }
}

/// The name (`a1`..`e5`) of a square in the numbering of `to_move`.
pub fn square_name(square: u8, to_move: Colour) -> String {
    let red = mover_square(square, to_move);
    format!("{}{}", (b'a' + red % 5) as char, red / 5 + 1)
}

/// A move as a player reads it: `Ox c1-c2`, or `Ox pass` when the mover
/// has no move and gives up a card.
pub fn move_name(played: &Move, to_move: Colour, cards: &CardSet) -> String {
    let card = cards.card(played.card_slot).name;
    if played.is_pass() {
        format!("{card} pass")
    } else {
        format!("{card} {}-{}", square_name(played.from, to_move), square_name(played.to, to_move))
    }
}

/// The words of a text with their 1-based starting columns.
fn words(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                out.push((text[..s].chars().count() + 1, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Reads a position in notation; card names must be cards of `cards`.
pub fn parse(text: &str, cards: &CardSet) -> Result<Setup, NotationError> {
    let fields = words(text);
    const NAMES: [&str; 5] = ["the board", "the side to move", "Red's cards", "Blue's cards", "the side card"];
    if fields.len() < NAMES.len() {
        let column = text.chars().count() + 1;
        return Err(NotationError { column, problem: format!("{} is missing", NAMES[fields.len()]) });
    }
    if fields.len() > NAMES.len() {
        let (column, word) = fields[NAMES.len()];
        return Err(NotationError { column, problem: format!("unexpected '{word}' after the side card") });
    }
    let (red, blue, red_master, blue_master) = parse_board(fields[0].0, fields[0].1)?;
    let to_move = match fields[1].1 {
        "r" | "R" => Colour::Red,
        "b" | "B" => Colour::Blue,
        other => {
            let problem = format!("the side to move must be 'r' (Red) or 'b' (Blue), not '{other}'");
            return Err(NotationError { column: fields[1].0, problem });
        }
    };
    let red_cards = parse_hand(fields[2], cards, "Red")?;
    let blue_cards = parse_hand(fields[3], cards, "Blue")?;
    let side = parse_card(fields[4].0, fields[4].1, cards)?;
    let (mover_cards, opponent_cards) = match to_move {
        Colour::Red => (red_cards, blue_cards),
        Colour::Blue => (blue_cards, red_cards),
    };
    let card_state = CardState::from_hands(mover_cards, opponent_cards, side).ok_or_else(|| NotationError {
        column: fields[2].0,
        problem: "a card is dealt twice: the hands and the side card must be five different cards".into(),
    })?;
    let (mover, opponent, mover_master, opponent_master) = match to_move {
        Colour::Red => (red, blue, red_master, blue_master),
        Colour::Blue => (rotate(blue), rotate(red), rotate_square(blue_master), rotate_square(red_master)),
    };
    let position = Position { mover, opponent, mover_master, opponent_master, cards: card_state };
    Ok(Setup { to_move, position })
}

/// Red's board, Blue's board and the masters, in Red's numbering.
fn parse_board(column: usize, board: &str) -> Result<(u32, u32, u8, u8), NotationError> {
    let error = |offset: usize, problem: String| Err(NotationError { column: column + offset, problem });
    let (mut red, mut blue) = (0u32, 0u32);
    let (mut red_master, mut blue_master) = (None, None);
    let (mut row, mut col) = (0usize, 0usize);
    for (offset, c) in board.chars().enumerate() {
        if c == '/' {
            if col != 5 {
                return error(offset, format!("row {} has {col} squares, not 5", 5 - row));
            }
            row += 1;
            col = 0;
            if row == 5 {
                return error(offset, "the board has more than 5 rows".into());
            }
            continue;
        }
        let empty = match c {
            '1'..='5' => c as usize - '0' as usize,
            '.' => 1,
            'R' | 'r' | 'B' | 'b' => 0,
            _ => {
                let problem =
                    format!("'{c}' is not a piece (R, r, B, b), a count of empty squares (1-5) or '.' and not '/'");
                return error(offset, problem);
            }
        };
        if col + empty.max(1) > 5 {
            return error(offset, format!("row {} has more than 5 squares", 5 - row));
        }
        if empty > 0 {
            col += empty;
            continue;
        }
        let square = red_square(row, col);
        let is_master = c.is_ascii_uppercase();
        let (board, master) =
            if c.eq_ignore_ascii_case(&'r') { (&mut red, &mut red_master) } else { (&mut blue, &mut blue_master) };
        *board |= 1 << square;
        if is_master {
            if master.is_some() {
                return error(offset, format!("a second {} master", if c == 'R' { "Red" } else { "Blue" }));
            }
            *master = Some(square);
        }
        col += 1;
    }
    let end = board.chars().count();
    if row != 4 || col != 5 {
        return error(end, format!("the board has {} rows; it needs 5 rows of 5 squares", row + 1));
    }
    for (pieces, name) in [(red, "Red"), (blue, "Blue")] {
        if pieces.count_ones() as usize > MAX_PIECES_PER_SIDE {
            return error(0, format!("{name} has {} pieces, at most {MAX_PIECES_PER_SIDE}", pieces.count_ones()));
        }
    }
    let Some(red_master) = red_master else { return error(0, "Red has no master (R)".into()) };
    let Some(blue_master) = blue_master else { return error(0, "Blue has no master (B)".into()) };
    debug_assert!((red | blue) & !((1 << SQUARES) - 1) == 0);
    Ok((red, blue, red_master, blue_master))
}

fn parse_hand((column, text): (usize, &str), cards: &CardSet, owner: &str) -> Result<[usize; 2], NotationError> {
    let names: Vec<&str> = text.split(',').collect();
    if names.len() != 2 {
        let problem = format!("{owner} needs two cards separated by a comma, got '{text}'");
        return Err(NotationError { column, problem });
    }
    let first = parse_card(column, names[0], cards)?;
    let second = parse_card(column + names[0].chars().count() + 1, names[1], cards)?;
    Ok([first, second])
}

fn parse_card(column: usize, name: &str, cards: &CardSet) -> Result<usize, NotationError> {
    cards.slot_of(name).ok_or_else(|| NotationError {
        column,
        problem: format!("'{name}' is not one of this table's cards ({cards})"),
    })
}

/// Red's and Blue's boards and masters, in Red's numbering.
fn red_view(setup: &Setup) -> (u32, u32, u8, u8) {
    let p = &setup.position;
    match setup.to_move {
        Colour::Red => (p.mover, p.opponent, p.mover_master, p.opponent_master),
        Colour::Blue => {
            (rotate(p.opponent), rotate(p.mover), rotate_square(p.opponent_master), rotate_square(p.mover_master))
        }
    }
}

fn piece_at(setup: &Setup, red_square: u8) -> Option<char> {
    let (red, blue, red_master, blue_master) = red_view(setup);
    if red & (1 << red_square) != 0 {
        Some(if red_square == red_master { 'R' } else { 'r' })
    } else if blue & (1 << red_square) != 0 {
        Some(if red_square == blue_master { 'B' } else { 'b' })
    } else {
        None
    }
}

/// (Red's cards, Blue's cards, side card) as names.
fn hands(setup: &Setup, cards: &CardSet) -> ([&'static str; 2], [&'static str; 2], &'static str) {
    let k = setup.position.cards;
    let name = |slot: usize| cards.card(slot).name;
    let (mover, opponent) = (k.mover_cards().map(name), k.opponent_cards().map(name));
    match setup.to_move {
        Colour::Red => (mover, opponent, name(k.side())),
        Colour::Blue => (opponent, mover, name(k.side())),
    }
}

/// The notation of a position.
pub fn to_notation(setup: &Setup, cards: &CardSet) -> String {
    let mut rows = Vec::with_capacity(5);
    for row in 0..5 {
        let mut text = String::new();
        let mut empty = 0;
        for col in 0..5 {
            match piece_at(setup, red_square(row, col)) {
                Some(piece) => {
                    if empty > 0 {
                        text += &empty.to_string();
                        empty = 0;
                    }
                    text.push(piece);
                }
                None => empty += 1,
            }
        }
        if empty > 0 {
            text += &empty.to_string();
        }
        rows.push(text);
    }
    let (red, blue, side) = hands(setup, cards);
    let to_move = if setup.to_move == Colour::Red { 'r' } else { 'b' };
    format!("{} {to_move} {},{} {},{} {side}", rows.join("/"), red[0], red[1], blue[0], blue[1])
}

/// The board as a diagram with coordinates, then the cards and the side to
/// move.
pub fn diagram(setup: &Setup, cards: &CardSet) -> String {
    let mut out = String::from("  a b c d e\n");
    for row in 0..5 {
        out += &format!("{}", 5 - row);
        for col in 0..5 {
            out.push(' ');
            out.push(piece_at(setup, red_square(row, col)).unwrap_or('.'));
        }
        out.push('\n');
    }
    let (red, blue, side) = hands(setup, cards);
    out += &format!(
        "red: {}, {}   blue: {}, {}   side: {side}   {} to move\n",
        red[0], red[1], blue[0], blue[1], setup.to_move
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = "bbBbb/5/5/5/rrRrr r Boar,Ox Crab,Horse Elephant";

    #[test]
    fn the_start_position_reads_and_writes_back() {
        let cards = CardSet::default_set();
        let setup = parse(START, &cards).unwrap();
        assert_eq!(setup.to_move, Colour::Red);
        assert_eq!(setup.position.mover, 0b11111);
        assert_eq!(setup.position.mover_master, 2);
        assert_eq!(setup.position.opponent_master, 22);
        assert!(setup.position.is_well_formed() && !setup.position.is_game_over());
        assert_eq!(to_notation(&setup, &cards), START);
        let blue = "1b3/2B2/5/r4/2R2 b ox,boar crab,horse elephant";
        let setup = parse(blue, &cards).unwrap();
        assert_eq!(setup.to_move, Colour::Blue);
        // Blue's master on c4 is square 2 + 5 = 7 from Blue's side.
        assert_eq!(setup.position.mover_master, 7);
        assert_eq!(to_notation(&setup, &cards), "1b3/2B2/5/r4/2R2 b Boar,Ox Crab,Horse Elephant");
        assert_eq!(square_name(setup.position.mover_master, Colour::Blue), "c4");
        assert!(diagram(&setup, &cards).contains("4 . . B . ."));
    }

    #[test]
    fn errors_say_what_and_where() {
        let cards = CardSet::default_set();
        let cases: [(&str, usize, &str); 10] = [
            ("bbBbb/5/5/5/rrRrx r Boar,Ox Crab,Horse Elephant", 17, "'x' is not a piece"),
            ("bbBbb/5/5/4/rrRrr r Boar,Ox Crab,Horse Elephant", 12, "row 2 has 4 squares"),
            ("bbBbb/5/5/5/rrRrr1 r Boar,Ox Crab,Horse Elephant", 18, "more than 5 squares"),
            ("bbBbb/5/5/5 r Boar,Ox Crab,Horse Elephant", 12, "the board has 4 rows"),
            ("bbBbb/5/5/5/rrrrr r Boar,Ox Crab,Horse Elephant", 1, "Red has no master"),
            ("bbBbb/5/5/5/rRRrr r Boar,Ox Crab,Horse Elephant", 15, "a second Red master"),
            ("bbBbb/5/5/5/rrRrr x Boar,Ox Crab,Horse Elephant", 19, "side to move"),
            ("bbBbb/5/5/5/rrRrr r Boar,Tiger Crab,Horse Elephant", 26, "'Tiger' is not one of"),
            ("bbBbb/5/5/5/rrRrr r Boar,Ox Crab,Ox Elephant", 21, "dealt twice"),
            ("bbBbb/5/5/5/rrRrr r Boar,Ox Crab,Horse", 39, "the side card is missing"),
        ];
        for (text, column, needle) in cases {
            let error = parse(text, &cards).unwrap_err();
            assert!(error.problem.contains(needle), "{text}: {error}");
            assert_eq!(error.column, column, "{text}: {error}");
        }
    }
}

//! The game of Onitama: cards, card sets, card states, positions and moves.
//!
//! Owns everything about the rules and nothing about storage: no index, no
//! I/O. Positions are always seen from the side to move ("mover"), which
//! moves toward higher rows; after a move the board is turned 180 degrees so
//! that the new mover again moves up. Square = 5 * row + col.
//!
//! Card states: the five cards of a game are dealt 2 (mover), 2 (opponent)
//! and 1 (side), 30 ways. A card state `k` is `side * 6 + pair`, where `pair`
//! picks the mover's two cards among the four non-side cards (in card-set
//! order, pairs in the order of [`PAIRS`]). Grouping by side card matters for
//! speed: after a move with card `c`, `c` is the side card, so every
//! successor state of a move with `c` lies in the six bits `6c..6c+6` of a
//! 30-bit card-state word.

use std::fmt;
use thiserror::Error;

/// Number of squares on the board.
pub const SQUARES: usize = 25;
/// Bits of a 25-square bitboard.
pub const BOARD_MASK: u32 = (1 << SQUARES) - 1;
/// Cards in one game.
pub const CARDS_PER_GAME: usize = 5;
/// 5 choose 1 side card times 4 choose 2 mover cards.
pub const CARD_STATES: usize = 30;
/// Bits of a card-state word: one bit per card state.
pub const ALL_CARD_STATES: u32 = (1 << CARD_STATES) - 1;
/// Most pieces one side can have: a master and four students.
pub const MAX_PIECES_PER_SIDE: usize = 5;
/// The square the mover's master must reach to win: the centre of the
/// opponent's home row (row 4, col 2).
pub const MOVER_TARGET: u8 = 22;
/// The square the opponent's master must reach: the mover's temple.
pub const OPPONENT_TARGET: u8 = 2;

const _: () = assert!(CARD_STATES == 5 * 6);
const _: () = assert!(MOVER_TARGET as usize == SQUARES - 1 - OPPONENT_TARGET as usize);

/// Mover's card pairs among the four non-side cards, by position.
pub const PAIRS: [(usize, usize); 6] = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];

/// Each card state's deal: the mover's two slots, the opponent's two, the
/// side card (worked out once at compile time: the deep check and probing
/// look deals up for every move, and searching the 30 states for one was
/// a quarter of the deep check's time).
const DEALS: [[u8; CARDS_PER_GAME]; CARD_STATES] = {
    let mut deals = [[0u8; CARDS_PER_GAME]; CARD_STATES];
    let mut k = 0;
    while k < CARD_STATES {
        let others = others(k / 6);
        let (a, b) = PAIRS[k % 6];
        let mut opponent = [0u8; 2];
        let (mut i, mut n) = (0, 0);
        while i < 4 {
            if i != a && i != b {
                opponent[n] = others[i] as u8;
                n += 1;
            }
            i += 1;
        }
        deals[k] = [others[a] as u8, others[b] as u8, opponent[0], opponent[1], (k / 6) as u8];
        k += 1;
    }
    deals
};

/// [`AFTER_PLAYING`]'s entry for a card the mover does not hold.
const NOT_HELD: u8 = u8::MAX;

/// `AFTER_PLAYING[k][slot]`: the card state after the mover of state `k`
/// plays `slot` (see [`CardState::after_playing`]), or [`NOT_HELD`].
const AFTER_PLAYING: [[u8; CARDS_PER_GAME]; CARD_STATES] = {
    let mut after = [[NOT_HELD; CARDS_PER_GAME]; CARD_STATES];
    let mut k = 0;
    while k < CARD_STATES {
        let deal = DEALS[k];
        // The new mover holds the old opponent's cards; the played card
        // goes to the side (the old mover's hand follows from the rest).
        let new_mover = [deal[2] as usize, deal[3] as usize];
        after[k][deal[0] as usize] = state_of(new_mover, deal[0] as usize) as u8;
        after[k][deal[1] as usize] = state_of(new_mover, deal[1] as usize) as u8;
        k += 1;
    }
    after
};

/// The four non-side card slots in ascending order.
const fn others(side: usize) -> [usize; 4] {
    let mut out = [0; 4];
    let (mut slot, mut n) = (0, 0);
    while slot < CARDS_PER_GAME {
        if slot != side {
            out[n] = slot;
            n += 1;
        }
        slot += 1;
    }
    out
}

/// The card state whose mover holds `mover` (either order) with `side` on
/// the side; the five slots must be all different.
const fn state_of(mover: [usize; 2], side: usize) -> usize {
    // A mover slot's position among the four non-side slots.
    let (a, b) = (mover[0] - (mover[0] > side) as usize, mover[1] - (mover[1] > side) as usize);
    let (low, high) = if a < b { (a, b) } else { (b, a) };
    let mut pair = 0;
    while PAIRS[pair].0 != low || PAIRS[pair].1 != high {
        pair += 1;
    }
    side * 6 + pair
}

/// A movement card: a name and the (dx, dy) offsets it allows the side that
/// holds it, seen from that side (dy > 0 is forward).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Card {
    pub name: &'static str,
    pub offsets: &'static [(i8, i8)],
}

/// The 16 cards of the base game. Card definitions are data: a new card is a
/// new entry here and nothing else changes.
pub const BASE_CARDS: [Card; 16] = [
    Card { name: "Boar", offsets: &[(0, 1), (-1, 0), (1, 0)] },
    Card { name: "Cobra", offsets: &[(-1, 0), (1, 1), (1, -1)] },
    Card { name: "Crab", offsets: &[(0, 1), (-2, 0), (2, 0)] },
    Card { name: "Crane", offsets: &[(0, 1), (-1, -1), (1, -1)] },
    Card { name: "Dragon", offsets: &[(-2, 1), (2, 1), (-1, -1), (1, -1)] },
    Card { name: "Eel", offsets: &[(-1, 1), (-1, -1), (1, 0)] },
    Card { name: "Elephant", offsets: &[(-1, 1), (1, 1), (-1, 0), (1, 0)] },
    Card { name: "Frog", offsets: &[(-2, 0), (-1, 1), (1, -1)] },
    Card { name: "Goose", offsets: &[(-1, 1), (-1, 0), (1, 0), (1, -1)] },
    Card { name: "Horse", offsets: &[(0, 1), (-1, 0), (0, -1)] },
    Card { name: "Mantis", offsets: &[(-1, 1), (1, 1), (0, -1)] },
    Card { name: "Monkey", offsets: &[(-1, 1), (1, 1), (-1, -1), (1, -1)] },
    Card { name: "Ox", offsets: &[(0, 1), (1, 0), (0, -1)] },
    Card { name: "Rabbit", offsets: &[(2, 0), (1, 1), (-1, -1)] },
    Card { name: "Rooster", offsets: &[(1, 1), (-1, 0), (1, 0), (-1, -1)] },
    Card { name: "Tiger", offsets: &[(0, 2), (0, -1)] },
];

/// The card set most published numbers use.
pub const DEFAULT_CARD_NAMES: [&str; 5] = ["Boar", "Ox", "Elephant", "Horse", "Crab"];

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RulesError {
    #[error("unknown card '{0}' (known cards: {1})")]
    UnknownCard(String, String),
    #[error("card '{0}' is named twice")]
    DuplicateCard(String),
    #[error("a card set needs exactly 5 cards, got {0}")]
    WrongCardCount(usize),
    #[error("unknown no-move rule '{0}' (expected 'pass' or 'loss')")]
    UnknownNoMoveRule(String),
}

/// What happens when the side to move has no legal move with either card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoMoveRule {
    /// Official rule: exchange one of one's cards with the side card
    /// without moving.
    Pass,
    /// As some generators count it: the side without a move loses.
    Loss,
}

impl NoMoveRule {
    pub fn name(self) -> &'static str {
        match self {
            NoMoveRule::Pass => "pass",
            NoMoveRule::Loss => "loss",
        }
    }
}

impl std::str::FromStr for NoMoveRule {
    type Err = RulesError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "pass" => Ok(NoMoveRule::Pass),
            "loss" => Ok(NoMoveRule::Loss),
            _ => Err(RulesError::UnknownNoMoveRule(s.to_string())),
        }
    }
}

/// Five distinct cards, kept in catalogue order so that the same set always
/// gives the same card-state numbering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CardSet {
    cards: [Card; CARDS_PER_GAME],
}

impl CardSet {
    /// Parses names (case-insensitive) against the base catalogue.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<CardSet, RulesError> {
        Self::from_names_in(names, &BASE_CARDS)
    }

    /// Parses names against any catalogue (expansion cards, a user's own).
    pub fn from_names_in<S: AsRef<str>>(names: &[S], catalogue: &[Card]) -> Result<CardSet, RulesError> {
        let mut picked: Vec<usize> = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref().trim();
            let id = catalogue.iter().position(|card| card.name.eq_ignore_ascii_case(name)).ok_or_else(|| {
                let known: Vec<&str> = catalogue.iter().map(|c| c.name).collect();
                RulesError::UnknownCard(name.to_string(), known.join(", "))
            })?;
            if picked.contains(&id) {
                return Err(RulesError::DuplicateCard(catalogue[id].name.to_string()));
            }
            picked.push(id);
        }
        if picked.len() != CARDS_PER_GAME {
            return Err(RulesError::WrongCardCount(picked.len()));
        }
        picked.sort_unstable();
        let cards = std::array::from_fn(|i| catalogue[picked[i]]);
        Ok(CardSet { cards })
    }

    pub fn default_set() -> CardSet {
        CardSet::from_names(&DEFAULT_CARD_NAMES).expect("default card names are in the catalogue")
    }

    pub fn cards(&self) -> &[Card; CARDS_PER_GAME] {
        &self.cards
    }

    pub fn card(&self, slot: usize) -> Card {
        self.cards[slot]
    }

    /// Slot (0..5) of a card named `name` in this set.
    pub fn slot_of(&self, name: &str) -> Option<usize> {
        self.cards.iter().position(|c| c.name.eq_ignore_ascii_case(name))
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.cards.iter().map(|c| c.name).collect()
    }
}

impl fmt::Display for CardSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.names().join(","))
    }
}

/// The rules a table is built under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rules {
    pub cards: CardSet,
    pub no_move: NoMoveRule,
}

impl Default for Rules {
    fn default() -> Self {
        Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Pass }
    }
}

/// One of the 30 deals of the five cards, see the module comment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CardState(u8);

impl CardState {
    pub fn new(index: usize) -> CardState {
        assert!(index < CARD_STATES, "card state {index} out of range");
        CardState(index as u8)
    }

    pub fn index(self) -> usize {
        self.0 as usize
    }

    pub fn all() -> impl Iterator<Item = CardState> {
        (0..CARD_STATES).map(CardState::new)
    }

    /// The slot of the side card.
    pub fn side(self) -> usize {
        self.index() / 6
    }

    /// Slots of the mover's two cards.
    pub fn mover_cards(self) -> [usize; 2] {
        let deal = DEALS[self.index()];
        [deal[0] as usize, deal[1] as usize]
    }

    /// Slots of the opponent's two cards.
    pub fn opponent_cards(self) -> [usize; 2] {
        let deal = DEALS[self.index()];
        [deal[2] as usize, deal[3] as usize]
    }

    /// The card state with these hands; `None` unless the five slots are
    /// all different.
    pub fn from_hands(mover: [usize; 2], opponent: [usize; 2], side: usize) -> Option<CardState> {
        let mut seen = 0u32;
        for slot in [mover[0], mover[1], opponent[0], opponent[1], side] {
            if slot >= CARDS_PER_GAME || seen & (1 << slot) != 0 {
                return None;
            }
            seen |= 1 << slot;
        }
        Some(CardState(state_of(mover, side) as u8))
    }

    pub fn holds(self, slot: usize) -> bool {
        self.mover_cards().contains(&slot)
    }

    /// The card state after the mover plays (or, passing, gives up) card
    /// `slot`, seen from the new mover: `slot` becomes the side card, the old
    /// side card goes to the old mover, who is now the opponent.
    ///
    /// # Panics
    /// If the mover does not hold `slot`.
    pub fn after_playing(self, slot: usize) -> CardState {
        let next = AFTER_PLAYING[self.index()][slot];
        assert!(next != NOT_HELD, "card slot {slot} not held in state {}", self.0);
        CardState(next)
    }
}

/// Per-card-set lookup tables for card-state words (30-bit masks, bit k =
/// card state k).
#[derive(Clone, Debug)]
pub struct CardTables {
    /// States in which the mover holds card slot c.
    pub holds: [u32; CARDS_PER_GAME],
    /// `expand[c][g]`: for a 6-bit set g of successor states in group c (side
    /// card c), the set of states holding c whose move with c leads into g.
    pub expand: [[u32; 64]; CARDS_PER_GAME],
    /// `held_into[c][g]`: `expand[c][g]` and the states not holding c, the
    /// part of [`CardTables::all_held`] for card c by one look-up (an OR
    /// with the card's `holds` at every call was about a third of its
    /// instructions).
    held_into: [[u32; 64]; CARDS_PER_GAME],
}

impl CardTables {
    pub fn new() -> CardTables {
        let mut holds = [0u32; CARDS_PER_GAME];
        let mut expand = [[0u32; 64]; CARDS_PER_GAME];
        for k in CardState::all() {
            for slot in k.mover_cards() {
                holds[slot] |= 1 << k.index();
                let next = k.after_playing(slot);
                debug_assert_eq!(next.side(), slot);
                let bit = next.index() % 6;
                for (g, word) in expand[slot].iter_mut().enumerate() {
                    if g & (1 << bit) != 0 {
                        *word |= 1 << k.index();
                    }
                }
            }
        }
        let held_into = std::array::from_fn(|c| expand[c].map(|word| (word | !holds[c]) & ALL_CARD_STATES));
        CardTables { holds, expand, held_into }
    }

    /// Mask of the six states of group c (side card c).
    pub const fn group_mask(slot: usize) -> u32 {
        0x3f << (6 * slot)
    }

    /// Maps a word over successor states (any group) to the states of the
    /// mover whose move with a card in `cards` (bit set of slots) leads into
    /// the word: OR over those cards.
    #[inline]
    pub fn any_predecessor(&self, successor_word: u32, cards: u32) -> u32 {
        let mut out = 0;
        let mut cards = cards;
        while cards != 0 {
            let c = cards.trailing_zeros() as usize;
            cards &= cards - 1;
            out |= self.expand[c][((successor_word >> (6 * c)) & 0x3f) as usize];
        }
        out
    }

    /// States in which every card the mover holds has all its moves into the
    /// per-card accumulated sets of `acc_and` (group c = AND over moves with
    /// card c); a held card with no moves counts as vacuously true.
    #[inline]
    pub fn all_held(&self, acc_and: u32) -> u32 {
        let mut out = ALL_CARD_STATES;
        for c in 0..CARDS_PER_GAME {
            out &= self.held_into[c][((acc_and >> (6 * c)) & 0x3f) as usize];
        }
        out
    }
}

impl Default for CardTables {
    fn default() -> Self {
        Self::new()
    }
}

/// [`winning_slots`] for one card set by table lookups, and the card states
/// that win in one ply: for readers of compressed tables, which recompute
/// these for every layout of a block they read.
#[derive(Clone, Debug)]
pub struct WinsInOne {
    /// `captures[slot][square]`: the squares from which a piece takes a
    /// master standing on `square` with that card.
    captures: [[u32; SQUARES]; CARDS_PER_GAME],
    /// `reaches[slot]`: the squares from which the master steps onto
    /// [`MOVER_TARGET`] with that card.
    reaches: [u32; CARDS_PER_GAME],
    /// For each set of winning slots, the card states holding one of them.
    states: [u32; 1 << CARDS_PER_GAME],
}

impl WinsInOne {
    pub fn new(cards: &CardSet) -> WinsInOne {
        let mut captures = [[0u32; SQUARES]; CARDS_PER_GAME];
        let mut reaches = [0u32; CARDS_PER_GAME];
        for (slot, card) in cards.cards().iter().enumerate() {
            for square in 0..SQUARES as u8 {
                for &(dx, dy) in card.offsets {
                    if let Some(from) = step(square, -dx, -dy) {
                        captures[slot][square as usize] |= 1 << from;
                    }
                    if step(square, dx, dy) == Some(MOVER_TARGET) {
                        reaches[slot] |= 1 << square;
                    }
                }
            }
        }
        let holds = CardTables::new().holds;
        let states = std::array::from_fn(|slots| {
            (0..CARDS_PER_GAME).filter(|slot| slots & (1 << slot) != 0).fold(0, |word, slot| word | holds[slot])
        });
        WinsInOne { captures, reaches, states }
    }

    /// [`winning_slots`] of the card set.
    #[inline]
    pub fn slots(&self, mover: u32, mover_master: u8, opponent_master: u8) -> u32 {
        self.taking_slots(mover, opponent_master) | self.reaching_slots(mover, mover_master)
    }

    /// The card slots with which some piece of `mover` takes a master
    /// standing on `opponent_master`.
    #[inline]
    pub fn taking_slots(&self, mover: u32, opponent_master: u8) -> u32 {
        (0..CARDS_PER_GAME).fold(0, |slots, slot| {
            slots | ((self.captures[slot][opponent_master as usize] & mover != 0) as u32) << slot
        })
    }

    /// The card slots with which `mover`'s master, on `mover_master`,
    /// steps onto [`MOVER_TARGET`]: none if an own piece stands there.
    #[inline]
    pub fn reaching_slots(&self, mover: u32, mover_master: u8) -> u32 {
        if mover & (1 << MOVER_TARGET) != 0 {
            return 0;
        }
        (0..CARDS_PER_GAME).fold(0, |slots, slot| slots | (self.reaches[slot] >> mover_master & 1) << slot)
    }

    /// The card states (bit k = state k) holding one of the card `slots`:
    /// those in which the mover wins in one ply, given its winning slots.
    #[inline]
    pub fn states_of_slots(&self, slots: u32) -> u32 {
        self.states[slots as usize]
    }

    /// The card states (bit k = state k) in which the mover wins in one ply.
    #[inline]
    pub fn states(&self, mover: u32, mover_master: u8, opponent_master: u8) -> u32 {
        self.states_of_slots(self.slots(mover, mover_master, opponent_master))
    }
}

/// A master already stands on its target square: the game ended before the
/// position, so it has no value.
#[inline]
pub fn masters_end_game(mover_master: u8, opponent_master: u8) -> bool {
    mover_master == MOVER_TARGET || opponent_master == OPPONENT_TARGET
}

/// Card slots (bit set) with which the mover wins on the spot: some piece
/// captures the opponent's master, or the mover's master steps onto
/// [`MOVER_TARGET`] (not occupied by its own piece). Card states are not
/// involved: a state wins in one ply iff it holds one of these slots.
#[inline]
pub fn winning_slots(cards: &CardSet, mover: u32, mover_master: u8, opponent_master: u8) -> u32 {
    let mut slots = 0;
    for (slot, card) in cards.cards().iter().enumerate() {
        let wins = card.offsets.iter().any(|&(dx, dy)| {
            let captures = step(opponent_master, -dx, -dy).is_some_and(|from| mover & (1 << from) != 0);
            let reaches = step(mover_master, dx, dy) == Some(MOVER_TARGET) && mover & (1 << MOVER_TARGET) == 0;
            captures || reaches
        });
        if wins {
            slots |= 1 << slot;
        }
    }
    slots
}

/// Turns a bitboard by 180 degrees: square s goes to 24 - s.
#[inline]
pub fn rotate(board: u32) -> u32 {
    debug_assert_eq!(board & !BOARD_MASK, 0);
    board.reverse_bits() >> (32 - SQUARES)
}

#[inline]
pub fn rotate_square(square: u8) -> u8 {
    (SQUARES as u8 - 1) - square
}

/// The square reached from `square` by (dx, dy), if on the board.
#[inline]
pub fn step(square: u8, dx: i8, dy: i8) -> Option<u8> {
    let col = (square % 5) as i8 + dx;
    let row = (square / 5) as i8 + dy;
    if (0..5).contains(&col) && (0..5).contains(&row) { Some((row * 5 + col) as u8) } else { None }
}

/// A position seen from the side to move. Boards are 25-bit bitboards that
/// include the masters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    pub mover: u32,
    pub opponent: u32,
    pub mover_master: u8,
    pub opponent_master: u8,
    pub cards: CardState,
}

/// What a move leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The mover wins on the spot (captured the master or reached the
    /// target square).
    Win,
    /// The game goes on from this position (seen from the new mover).
    Continue(Position),
}

/// A legal move (or a pass, with `from == to`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub card_slot: usize,
    pub from: u8,
    pub to: u8,
    pub outcome: Outcome,
}

impl Move {
    pub fn is_pass(&self) -> bool {
        self.from == self.to
    }
}

impl Position {
    /// Checks that boards are disjoint, masters are on their own pieces and
    /// piece counts are in range. Does not reject game-over positions.
    pub fn is_well_formed(&self) -> bool {
        let pieces_ok = |board: u32| (1..=MAX_PIECES_PER_SIDE as u32).contains(&board.count_ones());
        self.mover & !BOARD_MASK == 0
            && self.opponent & !BOARD_MASK == 0
            && self.mover & self.opponent == 0
            && pieces_ok(self.mover)
            && pieces_ok(self.opponent)
            && (self.mover_master as usize) < SQUARES
            && (self.opponent_master as usize) < SQUARES
            && self.mover & (1 << self.mover_master) != 0
            && self.opponent & (1 << self.opponent_master) != 0
    }

    /// A master already stands on its target square: the game ended before
    /// this position, so tables hold no value for it.
    pub fn is_game_over(&self) -> bool {
        masters_end_game(self.mover_master, self.opponent_master)
    }

    /// The mover has a move that wins on the spot, so the position is a win
    /// in one ply. Cheaper than [`Position::moves`].
    pub fn has_winning_move(&self, rules: &Rules) -> bool {
        let slots = winning_slots(&rules.cards, self.mover, self.mover_master, self.opponent_master);
        self.cards.mover_cards().iter().any(|&slot| slots & (1 << slot) != 0)
    }

    /// The board after the mover plays `slot` from `from` to `to` (or passes
    /// with `from == to`), turned to the new mover's view.
    fn play(&self, slot: usize, from: u8, to: u8) -> Outcome {
        let to_bit = 1u32 << to;
        if from != to && (to == self.opponent_master || (from == self.mover_master && to == MOVER_TARGET)) {
            return Outcome::Win;
        }
        let moved = (self.mover & !(1 << from)) | to_bit;
        let master = if from == self.mover_master { to } else { self.mover_master };
        Outcome::Continue(Position {
            mover: rotate(self.opponent & !to_bit),
            opponent: rotate(moved),
            mover_master: rotate_square(self.opponent_master),
            opponent_master: rotate_square(master),
            cards: self.cards.after_playing(slot),
        })
    }

    /// Every legal move, including passes when the rules call for them.
    /// Empty under [`NoMoveRule::Loss`] when the mover has no move.
    pub fn moves(&self, rules: &Rules) -> Vec<Move> {
        let mut moves = Vec::new();
        self.for_each_board_move(rules, |m| moves.push(m));
        if moves.is_empty() && rules.no_move == NoMoveRule::Pass {
            for slot in self.cards.mover_cards() {
                let at = self.mover_master;
                moves.push(Move { card_slot: slot, from: at, to: at, outcome: self.play(slot, at, at) });
            }
        }
        moves
    }

    /// Calls `visit` for every legal move of a piece (no passes), in the
    /// order of [`Position::moves`], without collecting them (the deep
    /// check looks at every move of every layout).
    pub fn for_each_board_move(&self, rules: &Rules, mut visit: impl FnMut(Move)) {
        for slot in self.cards.mover_cards() {
            let card = rules.cards.card(slot);
            let mut pieces = self.mover;
            while pieces != 0 {
                let from = pieces.trailing_zeros() as u8;
                pieces &= pieces - 1;
                for &(dx, dy) in card.offsets {
                    let Some(to) = step(from, dx, dy) else { continue };
                    if self.mover & (1 << to) != 0 {
                        continue;
                    }
                    visit(Move { card_slot: slot, from, to, outcome: self.play(slot, from, to) });
                }
            }
        }
    }

    /// Every position from which one move (not a pass, not a winning move)
    /// leads here, including captures of one of our students, which come from
    /// a material with one more mover piece.
    pub fn predecessors(&self, rules: &Rules) -> Vec<Position> {
        let mut out = Vec::new();
        let slot = self.cards.side();
        let card = rules.cards.card(slot);
        // The previous mover is our opponent; its pieces and cards in its
        // own (turned) view.
        let before_mover = rotate(self.opponent);
        let before_master = rotate_square(self.opponent_master);
        let before_opponent = rotate(self.mover);
        let opp_cards = self.cards.opponent_cards();
        let mut pieces = before_mover;
        while pieces != 0 {
            let to = pieces.trailing_zeros() as u8;
            pieces &= pieces - 1;
            for &(dx, dy) in card.offsets {
                let Some(from) = step(to, -dx, -dy) else { continue };
                if (before_mover | before_opponent) & (1 << from) != 0 {
                    continue;
                }
                let mover_board = (before_mover & !(1 << to)) | (1 << from);
                let master = if to == before_master { from } else { before_master };
                let mut boards = vec![before_opponent];
                if before_opponent.count_ones() < MAX_PIECES_PER_SIDE as u32 {
                    boards.push(before_opponent | (1 << to));
                }
                for opponent_board in boards {
                    for (kept, side) in [(opp_cards[0], opp_cards[1]), (opp_cards[1], opp_cards[0])] {
                        let cards = CardState::from_hands([slot, kept], self.cards.mover_cards(), side)
                            .expect("a deal stays a deal");
                        let before = Position {
                            mover: mover_board,
                            opponent: opponent_board,
                            mover_master: master,
                            opponent_master: rotate_square(self.mover_master),
                            cards,
                        };
                        if !before.is_game_over() {
                            out.push(before);
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookup tables agree with the rules' own check, for card sets
    /// with long moves too.
    #[test]
    fn wins_in_one_by_lookup_are_the_rules_wins() {
        let holds = CardTables::new().holds;
        for names in [["Boar", "Ox", "Elephant", "Horse", "Crab"], ["Tiger", "Dragon", "Frog", "Rabbit", "Crane"]] {
            let cards = CardSet::from_names(&names).unwrap();
            let wins = WinsInOne::new(&cards);
            let mut extra = 0x2545_f491u32;
            for mover_master in 0..SQUARES as u8 {
                for opponent_master in (0..SQUARES as u8).filter(|&s| s != mover_master) {
                    for _ in 0..8 {
                        extra ^= extra << 13;
                        extra ^= extra >> 17;
                        extra ^= extra << 5;
                        let mover = (extra & BOARD_MASK & !(1 << opponent_master)) | (1 << mover_master);
                        let slots = winning_slots(&cards, mover, mover_master, opponent_master);
                        assert_eq!(wins.slots(mover, mover_master, opponent_master), slots);
                        let states = (0..CARDS_PER_GAME).filter(|c| slots & (1 << c) != 0).fold(0, |w, c| w | holds[c]);
                        assert_eq!(wins.states(mover, mover_master, opponent_master), states);
                    }
                }
            }
        }
    }

    #[test]
    fn card_names_parse_case_insensitively_in_catalogue_order() {
        let set = CardSet::from_names(&["crab", "BOAR", "Ox", "horse", "Elephant"]).unwrap();
        assert_eq!(set.names(), vec!["Boar", "Crab", "Elephant", "Horse", "Ox"]);
        assert_eq!(set, CardSet::default_set());
    }

    #[test]
    fn bad_card_sets_are_refused() {
        assert!(matches!(
            CardSet::from_names(&["Boar", "Ox", "Elephant", "Horse", "Wolf"]),
            Err(RulesError::UnknownCard(..))
        ));
        assert_eq!(
            CardSet::from_names(&["Boar", "Ox", "Elephant", "Horse", "boar"]),
            Err(RulesError::DuplicateCard("Boar".into()))
        );
        assert_eq!(CardSet::from_names(&["Boar", "Ox"]), Err(RulesError::WrongCardCount(2)));
        assert_eq!(
            CardSet::from_names(&["Boar", "Ox", "Elephant", "Horse", "Crab", "Tiger"]),
            Err(RulesError::WrongCardCount(6))
        );
    }

    #[test]
    fn card_states_are_the_thirty_deals() {
        let mut seen = std::collections::HashSet::new();
        for k in CardState::all() {
            let m = k.mover_cards();
            let o = k.opponent_cards();
            let mut all = vec![m[0], m[1], o[0], o[1], k.side()];
            all.sort();
            assert_eq!(all, vec![0, 1, 2, 3, 4]);
            assert_eq!(CardState::from_hands(m, o, k.side()), Some(k));
            assert!(seen.insert((m, k.side())));
        }
    }

    /// The numbering stored tables depend on: k = side * 6 + pair, the
    /// mover's cards picked by `PAIRS` among the non-side slots in order.
    #[test]
    fn card_states_are_numbered_side_then_pair() {
        for k in CardState::all() {
            let side = k.index() / 6;
            let others: Vec<usize> = (0..CARDS_PER_GAME).filter(|&s| s != side).collect();
            let (a, b) = PAIRS[k.index() % 6];
            assert_eq!(k.mover_cards(), [others[a], others[b]]);
            let rest: Vec<usize> = others.iter().copied().filter(|&s| s != others[a] && s != others[b]).collect();
            assert_eq!(k.opponent_cards().to_vec(), rest);
            let [m0, m1] = k.mover_cards();
            assert_eq!(CardState::from_hands([m1, m0], k.opponent_cards(), side), Some(k));
        }
        assert_eq!(CardState::from_hands([0, 0], [2, 3], 4), None);
        assert_eq!(CardState::from_hands([0, 1], [2, 5], 4), None);
    }

    #[test]
    #[should_panic(expected = "not held")]
    fn playing_a_card_not_held_panics() {
        let k = CardState::new(0);
        k.after_playing(k.side());
    }

    #[test]
    fn playing_a_card_passes_it_to_the_side() {
        for k in CardState::all() {
            for slot in k.mover_cards() {
                let next = k.after_playing(slot);
                assert_eq!(next.side(), slot);
                let mut new_mover = next.mover_cards();
                new_mover.sort();
                let mut old_opp = k.opponent_cards();
                old_opp.sort();
                assert_eq!(new_mover, old_opp);
                assert!(next.opponent_cards().contains(&k.side()));
            }
        }
    }

    #[test]
    fn rotation_is_an_involution_and_maps_targets() {
        assert_eq!(rotate(1 << MOVER_TARGET), 1 << OPPONENT_TARGET);
        for s in 0..25u8 {
            assert_eq!(rotate(1 << s), 1 << rotate_square(s));
        }
        assert_eq!(rotate(rotate(0x1234567)), 0x1234567);
    }

    #[test]
    fn expand_tables_agree_with_after_playing() {
        let t = CardTables::new();
        for k in CardState::all() {
            for c in 0..5 {
                let expect = k.holds(c);
                assert_eq!(t.holds[c] & (1 << k.index()) != 0, expect);
                if expect {
                    let next = k.after_playing(c);
                    assert_ne!(t.any_predecessor(1 << next.index(), 1 << c) & (1 << k.index()), 0);
                }
            }
        }
    }

    #[test]
    fn all_held_is_every_held_card_leading_into_the_word() {
        let t = CardTables::new();
        let mut seed = 0x1234_5679_u32;
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            // Dense and sparse words both.
            let word = if seed & 1 == 0 { seed | seed >> 7 } else { seed & seed >> 5 } & ALL_CARD_STATES;
            let expect = CardState::all()
                .filter(|k| k.mover_cards().iter().all(|&c| word >> k.after_playing(c).index() & 1 != 0))
                .fold(0u32, |set, k| set | 1 << k.index());
            assert_eq!(t.all_held(word), expect, "{word:#x}");
        }
    }
}

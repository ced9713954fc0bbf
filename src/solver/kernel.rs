//! The per-group kernels of the solver: what one step does to the layouts of
//! one group, given the group's own lane segments and the segments of the
//! groups its moves land in.
//!
//! Owns move geometry and the step logic; knows nothing of where segments
//! live (memory or disk), of the schedule, or of files. Every kernel writes
//! only its own group's segments and reads segments nobody writes during the
//! step, so the result does not depend on the number of threads.

use super::capture_values::CaptureValues;
use super::crossing::{self, CrossingTable};
use super::flags::{FlagWriter, PlacementFlags, SideFlags};
use super::lanes::NO_EVENT;
use super::layout_bytes;
use super::mirror::{self, Mirror};
use super::move_lists::MoveLists;
use crate::index::{Group, Layout, MaterialIndex, Odometer, TurnedRows, nth_square};
use crate::rules::{
    ALL_CARD_STATES, CARD_STATES, CARDS_PER_GAME, CardTables, MAX_PIECES_PER_SIDE, MOVER_TARGET, NoMoveRule, Rules,
    SQUARES, masters_end_game,
};
#[cfg(test)]
use crate::rules::{rotate, rotate_square};
use crate::value::{self, DRAW, NO_VALUE, Value, ValueWidth};

/// Bytes of a cache line (x86_64 and most others), the step of prefetches
/// over a range.
const CACHE_LINE_BYTES: usize = 64;
/// Most distinct (dx, dy) offsets five cards can have: 5 cards * 4.
const MAX_OFFSETS: usize = 20;
/// Rows of the board: the regions of the index.
pub(super) const ROWS: usize = 5;

/// Move geometry of one card set, precomputed for the hot loops.
///
/// Moves are bit sets of target squares, so listing a piece's moves walks
/// only the squares it can go to (unblocked targets found by masking, not
/// by testing each of up to 20 offsets with a branch).
pub struct MoveTable {
    /// For each square, the squares some card moves a piece on it to.
    reach: [u32; SQUARES],
    /// `card_reach[c][from]`: the squares card slot c moves a piece to.
    card_reach: [[u32; SQUARES]; CARDS_PER_GAME],
    /// The cards of each move (none if no card has it), by
    /// [`MoveTable::target`]: a flat table of 32 x 32 so that a square
    /// pair needs no bounds check.
    targets: [Target; 1024],
    cards: CardTables,
    /// Card states after playing each card, for folding capture values.
    capture_values: CaptureValues,
    /// By bit set of card slots: the successor-state bits of a move with
    /// one of them ([`group_mask`]).
    successor_states: [u32; 1 << CARDS_PER_GAME],
    /// By bit set of card slots: the card states holding any of them
    /// ([`MoveTable::holding_any`], once a visit).
    holding: [u32; 1 << CARDS_PER_GAME],
    /// The card set's mirror, if it is mirror-closed (and steps are to
    /// use it).
    pub mirror: Option<Mirror>,
    /// Byte shuffles for the blocks of moves that pass a piece.
    crossing: CrossingTable,
}

/// The cards that move a piece from one square to another.
#[derive(Clone, Copy, Default)]
struct Target {
    /// Bit set of card slots with this offset.
    cards: u8,
    /// Successor-state bits of a move with one of those cards: their groups.
    successor_states: u32,
    /// The squares strictly between the two ([`between`]): a move passes
    /// another of the mover's pieces if one stands there. Looked up with
    /// the rest of the entry where a move is folded or kept, not worked
    /// out per listed move.
    between: u32,
}

impl Target {
    /// Does the move pass another piece of the mover's board `mover` (in
    /// square order, so that masters' ordinals change)?
    #[inline(always)]
    fn crosses(&self, mover: u32) -> bool {
        mover & self.between != 0
    }
}

impl MoveTable {
    pub fn new(rules: &Rules) -> MoveTable {
        let mut reach = [0u32; SQUARES];
        let mut card_reach = [[0u32; SQUARES]; CARDS_PER_GAME];
        let mut targets = [Target::default(); 1024];
        for (slot, card) in rules.cards.cards().iter().enumerate() {
            for &(dx, dy) in card.offsets {
                for from in 0..SQUARES as u8 {
                    if let Some(to) = crate::rules::step(from, dx, dy) {
                        reach[from as usize] |= 1 << to;
                        card_reach[slot][from as usize] |= 1 << to;
                        targets[target_index(from, to)].cards |= 1 << slot;
                    }
                }
            }
        }
        for (at, target) in targets.iter_mut().enumerate() {
            target.successor_states = group_mask(target.cards);
            let (from, to) = ((at >> 5) as u8, (at & 31) as u8);
            if target.cards != 0 {
                target.between = between(from, to);
            }
        }
        let successor_states = std::array::from_fn(|cards| group_mask(cards as u8));
        let card_tables = CardTables::new();
        let holding = std::array::from_fn(|cards| {
            (0..CARDS_PER_GAME).filter(|c| cards & (1 << c) != 0).fold(0, |out, c| out | card_tables.holds[c])
        });
        MoveTable {
            reach,
            card_reach,
            targets,
            cards: card_tables,
            capture_values: CaptureValues::new(),
            successor_states,
            holding,
            mirror: Mirror::of(&rules.cards),
            crossing: CrossingTable::new(),
        }
    }

    /// The cards that move a piece from `from` to `to`.
    #[inline(always)]
    fn target(&self, from: u8, to: u8) -> &Target {
        &self.targets[target_index(from, to)]
    }

    /// Card slots that move the piece on `from` to a square `own` leaves
    /// free.
    #[inline(always)]
    fn cards_moving(&self, from: u8, own: u32) -> u8 {
        let mut cards = 0;
        for (c, reach) in self.card_reach.iter().enumerate() {
            cards |= ((reach[from as usize] & !own != 0) as u8) << c;
        }
        cards
    }

    /// Card states holding at least one of the card slots in `cards`.
    #[inline(always)]
    fn holding_any(&self, cards: u8) -> u32 {
        self.holding[cards as usize & ((1 << CARDS_PER_GAME) - 1)]
    }
}

/// Where [`MoveTable::target`] keeps a square pair (squares are below 32).
#[inline(always)]
fn target_index(from: u8, to: u8) -> usize {
    debug_assert!((from as usize) < SQUARES && (to as usize) < SQUARES);
    ((from as usize) << 5 | to as usize) & 1023
}

/// Successor-state bits of a move with any of `cards`: their groups.
#[inline]
fn group_mask(cards: u8) -> u32 {
    let mut out = 0;
    for c in 0..CARDS_PER_GAME {
        if cards & (1 << c) != 0 {
            out |= CardTables::group_mask(c);
        }
    }
    out
}

/// The groups (and their segments of one lane) that the moves of one group
/// land in, by (from row, to row) of the moving piece. `[r][r]` is any move
/// within row r, or a pass.
pub(super) struct Landing<'a, T> {
    pub index: &'a MaterialIndex,
    /// By [`landing_slot`] of the move.
    groups: [LandingGroup<'a, T>; ROWS * ROWS],
}

/// Where in a [`Landing`] the moves from `from` to `to` land: by their rows.
#[inline(always)]
fn landing_slot(from: u8, to: u8) -> u8 {
    landing_slot_of_rows((from / 5) as usize, (to / 5) as usize)
}

/// [`landing_slot`] of the moves from row `from_row` into row `to_row`.
#[inline(always)]
fn landing_slot_of_rows(from_row: usize, to_row: usize) -> u8 {
    (from_row * ROWS + to_row) as u8
}

/// The squares of row 0 of a board; row r's are these shifted by 5 * r.
const ROW_SQUARES: u32 = (1 << 5) - 1;

/// A landing group and its segment, if the move exists in the index.
pub(super) type LandingGroup<'a, T> = Option<(&'a Group, &'a [T])>;

/// The groups of `target` that moves out of `group` land in, per
/// [`landing_slot`] (from row, to row): quiet moves, or captures
/// (`capture`) into rows of the bit set `rows` only. What a [`Landing`]
/// resolves, and so all of `target` its kernels read.
pub(super) fn landing_group_numbers(
    group: &Group,
    target: &MaterialIndex,
    capture: bool,
    rows: u8,
) -> [Option<usize>; ROWS * ROWS] {
    let mut groups = [None; ROWS * ROWS];
    for (from_row, row) in groups.chunks_exact_mut(ROWS).enumerate() {
        if group.mover_counts[from_row] == 0 {
            continue;
        }
        for (to_row, slot) in row.iter_mut().enumerate() {
            if rows & (1 << to_row) == 0 || (capture && group.opponent_counts[to_row] == 0) {
                continue;
            }
            let (mover, opponent) = landing_counts(group, from_row, to_row, capture);
            *slot = target.group_by_counts(&mover, &opponent);
        }
    }
    groups
}

impl<'a, T> Landing<'a, T> {
    /// The landing table of `group` in `target`: quiet moves, or captures
    /// (`capture`) into rows of the bit set `rows` only; `segment(g)` is
    /// target group g's segment of the lane read.
    pub fn new(
        group: &Group,
        target: &'a MaterialIndex,
        capture: bool,
        rows: u8,
        segment: impl Fn(usize) -> &'a [T],
    ) -> Landing<'a, T> {
        let groups = landing_group_numbers(group, target, capture, rows)
            .map(|slot| slot.map(|g| (&target.groups()[g], segment(g))));
        Landing { index: target, groups }
    }

    /// The landing group and its segment of moves in [`landing_slot`] `slot`.
    #[inline(always)]
    fn get(&self, slot: u8) -> (&'a Group, &'a [T]) {
        self.groups[slot as usize].expect("a move stays in the index")
    }

    /// Layout number within its group, and the group's segment, of the
    /// layout after moving `from` -> `to` (a pass when equal). `captured`
    /// is the square emptied by a capture (0 bits otherwise).
    #[inline(always)]
    fn find(&self, layout: &Layout, from: u8, to: u8, captured: u32) -> (usize, &'a [T]) {
        let (group, segment) = self.get(landing_slot(from, to));
        let moved = layout.mover ^ (1 << from) ^ (1 << to);
        let master = if from == layout.mover_master { to } else { layout.mover_master };
        let number = self.index.rank_turned(group, moved, layout.opponent & !captured, master, layout.opponent_master);
        ((number - group.first_layout) as usize, segment)
    }
}

/// Row counts of the group that a move from `from_row` to `to_row` (and a
/// capture in `to_row`, if `capture`) leads to, turned: (mover, opponent).
pub(super) fn landing_counts(group: &Group, from_row: usize, to_row: usize, capture: bool) -> ([u8; 5], [u8; 5]) {
    let mut turned_mover = group.opponent_counts;
    if capture {
        turned_mover[to_row] -= 1;
    }
    turned_mover.reverse();
    let mut moved = group.mover_counts;
    moved[from_row] -= 1;
    moved[to_row] += 1;
    moved.reverse();
    (turned_mover, moved)
}

/// Sets the bytes of card states `states` in one layout's `values`.
///
/// A store per state: stores into lines the cache does not hold retire
/// without waiting for them, where blending eight bytes at a time under a
/// mask loads the layout's bytes first. That was 23% fewer mispredicted
/// branches at 4 men, whose table the cache holds, and about 5% more CPU
/// time at 6 men, whose 1 GB of value bytes it does not
/// (docs/BENCHMARKS.md, session 43). One-byte values are now blended
/// wherever they are decided: resident steps ask for their placement's
/// bytes at the start of each visit ([`StepValues::decide`]), and
/// finishing's log entries come in layout order (session 68). This serves
/// value words and resident finishing's draws (few a layout).
#[inline]
pub(super) fn set_values(values: &mut [u8], states: u32, byte: u8) {
    let mut rest = states;
    while rest != 0 {
        let k = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        values[k] = byte;
    }
}

/// [`set_values`] at any width: stores `code` for card states `states` of
/// one layout's `values`.
#[inline]
pub(super) fn set_codes(width: ValueWidth, values: &mut [u8], states: u32, code: u16) {
    match width {
        ValueWidth::Byte => set_values(values, states, code as u8),
        ValueWidth::Word => {
            let mut rest = states;
            while rest != 0 {
                let k = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                value::set_word_at(values, k, code);
            }
        }
    }
}

/// [`set_codes`] for one layout's bytes that the cache holds or soon will:
/// one-byte values blended into the layout's two vectors
/// (`layout_bytes::set_cached`), value words a store per state.
#[inline(always)]
pub(super) fn set_codes_blended(width: ValueWidth, values: &mut [u8], states: u32, code: u16) {
    match width {
        ValueWidth::Byte => {
            layout_bytes::set_cached(values.try_into().expect("a layout's bytes"), [(states, code as u8)])
        }
        ValueWidth::Word => set_codes(width, values, states, code),
    }
}

/// One unit of work: placements `start..end` of one group of a material
/// with `p` mover and `q` opponent pieces.
#[derive(Clone, Copy)]
pub(super) struct Unit<'a> {
    pub group: &'a Group,
    pub p: usize,
    pub q: usize,
    pub start: u64,
    pub end: u64,
}

impl Unit<'_> {
    /// Is the unit all of its group's placements?
    pub fn is_whole_group(&self) -> bool {
        self.start == 0 && self.end * (self.p * self.q) as u64 == self.group.layouts
    }
}

/// What a unit reports after a step.
#[derive(Clone, Copy, Default)]
pub(super) struct UnitReport {
    /// States decided by this step.
    pub decided: u64,
    /// States still undecided.
    pub undecided: u64,
    /// Depths at which a capture value can make an undecided state due
    /// (initialisation only).
    pub events: EventDepths,
    /// Did the step change any of the unit's own lane words? (A streamed
    /// step writes back only groups it changed.)
    pub modified: bool,
    /// States lost at depth 0 (initialisation only: the no-move losses,
    /// which the first win step's moves may lead into).
    pub lost_at_start: u64,
}

impl UnitReport {
    pub fn merge(a: UnitReport, b: UnitReport) -> UnitReport {
        UnitReport {
            decided: a.decided + b.decided,
            undecided: a.undecided + b.undecided,
            events: a.events.union(b.events),
            modified: a.modified || b.modified,
            lost_at_start: a.lost_at_start + b.lost_at_start,
        }
    }
}

/// A set of depths: when capture values fall due. Depths 0..=255 one by
/// one; deeper ones (word-valued tables only) as the deepest of them,
/// every depth from 256 to it counting as held (a visit too many costs
/// time, never a value).
///
/// An undecided state whose best capture is a win in p plies wins at
/// depth p unless a quiet move wins sooner; one whose best capture loses
/// in p plies can lose no sooner than depth p (its loss is *held* until
/// then). Capture values never change once folded in, so the depths at
/// which a group has anything due are known at initialisation; states
/// decided since only make the set too big, which costs a visit, never a
/// wrong value.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub(super) struct EventDepths {
    words: [u64; 4],
    /// The deepest depth past 255 in the set, 0 if none.
    beyond: u16,
}

impl EventDepths {
    pub fn insert(&mut self, plies: u16) {
        if plies < 256 {
            self.words[(plies / 64) as usize] |= 1 << (plies % 64);
        } else {
            self.beyond = self.beyond.max(plies);
        }
    }

    pub fn contains(&self, plies: u16) -> bool {
        if plies < 256 { self.words[(plies / 64) as usize] & (1 << (plies % 64)) != 0 } else { plies <= self.beyond }
    }

    pub fn union(self, other: EventDepths) -> EventDepths {
        EventDepths {
            words: std::array::from_fn(|i| self.words[i] | other.words[i]),
            beyond: self.beyond.max(other.beyond),
        }
    }

    /// The set as four words of 64 depths each and the deepest depth past
    /// them (0: none): what a checkpoint records.
    pub fn to_record(self) -> ([u64; 4], u16) {
        (self.words, self.beyond)
    }

    /// The set a checkpoint recorded (see [`Self::to_record`]); None if it
    /// cannot be one (a depth past 255 said to be below 256).
    pub fn from_record(words: [u64; 4], beyond: u16) -> Option<EventDepths> {
        (beyond == 0 || beyond >= 256).then_some(EventDepths { words, beyond })
    }

    /// The deepest depth in the set, 0 if empty.
    pub fn deepest(&self) -> u16 {
        if self.beyond > 0 {
            return self.beyond;
        }
        (0..4)
            .rev()
            .find(|&i| self.words[i] != 0)
            .map_or(0, |i| i as u16 * 64 + 63 - self.words[i].leading_zeros() as u16)
    }
}

/// A layout's first event depth as `next_event` holds it: depths past a
/// byte's below [`NO_EVENT`] hold as [`DEEP_EVENT`], so the layout is looked
/// at in every step from then on until its event is met (word-valued
/// tables only: a byte's deepest event is 253 plies).
#[inline(always)]
fn next_event_byte(plies: u16) -> u8 {
    plies.min(DEEP_EVENT as u16) as u8
}

/// See [`next_event_byte`].
const DEEP_EVENT: u8 = NO_EVENT - 1;
const _: () = assert!(DEEP_EVENT as u16 > crate::value::MAX_WIN_PLIES);

/// Folds in the best value reachable by captures into `captured` (the
/// smaller material): values bytes of undecided states become the best
/// capture value. Only captures landing in rows of `rows` (a bit set) are
/// looked at, so the captured material can be streamed a slice at a time.
/// Like the steps, it lists a placement's captures once and adds only the
/// masters' ordinals per layout. `W` is the bytes per value of both
/// materials (1, or 2 for value words).
pub(super) fn fold_captures<const W: usize>(
    moves: &MoveTable,
    unit: Unit,
    captured: &Landing<u8>,
    rows: u8,
    values: &mut [u8],
) {
    const { assert!(W == 1 || W == 2) };
    let layout_bytes = CARD_STATES * W;
    let target_q = captured.index.material.opponent as usize;
    let per_placement = unit.p * unit.q;
    // (board move, the mover's board and the opponent's after the capture,
    // the cards), the boards worked out once per move, not per layout.
    let empty = BoardMove { from: 0, to: 0, block: &[][..] };
    let block_layouts = captured.index.material.mover as usize * target_q;
    let mut list = [(empty, 0u32, 0u32, 0u8); MAX_BOARD_MOVES];
    let row_squares = (0..ROWS).filter(|r| rows & (1 << r) != 0).fold(0u32, |squares, r| squares | (0x1f << (5 * r)));
    for_each_placement(unit.group, unit.start, unit.end, None, |i, mover, opponent, at| {
        // An image's words are written from its mirror's by `initialize`.
        if moves.mirror.is_some() && at.image_number() < unit.start + i as u64 {
            return;
        }
        let mut count = 0;
        let mut pieces = mover;
        while pieces != 0 {
            let from = pieces.trailing_zeros() as u8;
            pieces &= pieces - 1;
            let mut captures = moves.reach[from as usize] & opponent & row_squares;
            while captures != 0 {
                let to = captures.trailing_zeros() as u8;
                captures &= captures - 1;
                let (group, segment) = captured.get(landing_slot(from, to));
                let moved = mover ^ (1 << from) ^ (1 << to);
                let left = opponent & !(1 << to);
                let base = captured.index.turned_boards_part(group, moved, left) as usize;
                let block = &segment[base * layout_bytes..(base + block_layouts) * layout_bytes];
                list[count] = (BoardMove { from, to, block }, moved, left, moves.target(from, to).cards);
                count += 1;
            }
        }
        if count == 0 {
            return;
        }
        let mut mover_rest = mover;
        let mut n = i * per_placement;
        for _ in 0..unit.p {
            let mover_master = mover_rest.trailing_zeros() as u8;
            mover_rest &= mover_rest - 1;
            let mut opp_rest = opponent;
            for _ in 0..unit.q {
                let opponent_master = opp_rest.trailing_zeros() as u8;
                opp_rest &= opp_rest - 1;
                let this = n;
                n += 1;
                if masters_end_game(mover_master, opponent_master) {
                    continue;
                }
                let values = &mut values[this * layout_bytes..(this + 1) * layout_bytes];
                let captures = list[..count].iter().filter_map(|(m, moved, left, cards)| {
                    // Taking the master, or reaching the temple, wins.
                    if m.to == opponent_master || (m.from == mover_master && m.to == MOVER_TARGET) {
                        return None;
                    }
                    let turned_opponent = (left >> opponent_master >> 1).count_ones() as usize * target_q;
                    let at = board_successor(m, *moved, mover_master, turned_opponent) * layout_bytes;
                    Some((&m.block[at..at + layout_bytes], *cards))
                });
                if W == 1 {
                    moves.capture_values.fold(values, captures);
                } else {
                    moves.capture_values.fold_words(values, captures);
                }
            }
        }
    });
}

/// Own lane segments of a unit at initialisation.
pub(super) struct InitLanes<'a> {
    pub won: &'a mut [u32],
    pub lost: &'a mut [u32],
    pub fresh: &'a mut [u32],
    pub capture: &'a mut [u32],
    pub values: &'a mut [u8],
    /// Bytes per state of `values`.
    pub width: ValueWidth,
    /// Resident: each layout's first capture event depth, to fill.
    pub next_event: Option<&'a mut [u8]>,
}

/// Decides wins in one, no-move losses and game-over holes, after the
/// captures are folded into the value bytes. The sides of the no-move
/// losses are marked in `sides`: the first win step looks only at layouts
/// with a move into one of those sides (see [`SideFlags`]).
///
/// With the card set's mirror (`moves.mirror`; `unit` is then a whole
/// group), works the placements the steps solve, whose captures alone
/// were folded, and writes each one's image from it: `won`, `lost`,
/// `fresh` and the value bytes permuted, no `capture` bit and no event
/// (only a placement's own step reads those, and an image's is never
/// solved; a streamed capture schedule so lists no image).
pub(super) fn initialize(
    rules: &Rules,
    moves: &MoveTable,
    unit: Unit,
    mut own: InitLanes,
    sides: &SideFlags,
) -> UnitReport {
    let win1 = Value::Win(1).to_byte();
    let loss0 = Value::Loss(0).to_byte();
    let mut report = UnitReport::default();
    let (p, q) = (unit.p, unit.q);
    let mirror = moves.mirror.as_ref();
    let (width, layout_bytes) = (own.width, CARD_STATES * own.width.bytes());
    for_each_placement(unit.group, unit.start, unit.end, None, |i, mover, opponent, at| {
        let place = Placement::new(mover, opponent);
        let image = match mirrored(mirror, &unit, i, (mover, opponent), at) {
            Mirrored::Skipped => return,
            Mirrored::Writes(image) => Some(image),
            Mirrored::Own => None,
        };
        // Per card slot, the squares some mover piece moves to (own ones
        // included: the opponent's master never stands on those).
        let mut attacked = [0u32; CARDS_PER_GAME];
        let mut pieces = place.mover;
        while pieces != 0 {
            let from = pieces.trailing_zeros() as usize;
            pieces &= pieces - 1;
            for (attacked, reach) in attacked.iter_mut().zip(&moves.card_reach) {
                *attacked |= reach[from];
            }
        }
        let cards_with_moves =
            attacked.iter().enumerate().fold(0u8, |cards, (c, &to)| cards | ((to & !mover != 0) as u8) << c);
        let no_move = ALL_CARD_STATES & !moves.holding_any(cards_with_moves);
        // The master reaches the temple only if no own piece stands there.
        let temple = (1u32 << MOVER_TARGET) & !mover;
        // Taking the master, or the master reaching the temple, wins: the
        // cards that take each opponent piece, and those with which each
        // mover piece reaches the temple, worked out once per piece instead
        // of per layout (0.4% of a 6-men run's instructions).
        let (mut takes, mut reaches) = ([0u8; MAX_PIECES_PER_SIDE], [0u8; MAX_PIECES_PER_SIDE]);
        for (b, takes) in takes[..q].iter_mut().enumerate() {
            let square = place.opponent_square(b);
            *takes = (0..CARDS_PER_GAME).fold(0, |cards, c| cards | ((attacked[c] >> square & 1) as u8) << c);
        }
        for (a, reaches) in reaches[..p].iter_mut().enumerate() {
            let square = place.mover_square(a) as usize;
            *reaches = (0..CARDS_PER_GAME)
                .fold(0, |cards, c| cards | ((moves.card_reach[c][square] & temple != 0) as u8) << c);
        }
        for j in 0..p * q {
            let (a, b) = (j / q, j % q);
            let (n, layout) = (i * p * q + j, place.layout(a, b));
            let values = &mut own.values[n * layout_bytes..(n + 1) * layout_bytes];
            if masters_end_game(layout.mover_master, layout.opponent_master) {
                // Holes read as won and never fresh: quiet moves onto them
                // (a master reaching the temple) change nothing. (An
                // image of a hole is a hole: the temples are in the middle
                // column.)
                let image_n = image.map(|image| image.held_number(&place, (a, b)));
                for n in std::iter::once(n).chain(image_n) {
                    own.won[n] = ALL_CARD_STATES;
                    own.lost[n] = ALL_CARD_STATES;
                    own.fresh[n] = 0;
                    own.capture[n] = 0;
                    own.values[n * layout_bytes..(n + 1) * layout_bytes].fill(NO_VALUE);
                    if let Some(next_event) = own.next_event.as_deref_mut() {
                        next_event[n] = NO_EVENT;
                    }
                }
                continue;
            }
            let win_now = moves.holding_any(takes[b] | reaches[a]);
            let lost_now = if rules.no_move == NoMoveRule::Loss { no_move & !win_now } else { 0 };
            own.won[n] = win_now;
            own.lost[n] = lost_now;
            own.fresh[n] = lost_now;
            // Every capture value of an undecided state bounds it until it
            // falls due.
            let ((events, first_event), capture) = match width {
                ValueWidth::Byte => {
                    let values: &mut [u8; CARD_STATES] = values.try_into().expect("a layout's bytes");
                    // By two vector comparisons (a loop over the states was
                    // 0.4% of a 6-men run's instructions).
                    let with_value = ALL_CARD_STATES & !layout_bytes::states_holding(values, NO_VALUE);
                    let capture = with_value & !(win_now | lost_now);
                    let events = capture_events(values, capture);
                    layout_bytes::set_cached(values, [(win_now, win1), (lost_now, loss0)]);
                    (events, capture)
                }
                ValueWidth::Word => {
                    let with_value =
                        (0..CARD_STATES).fold(0u32, |set, k| set | ((width.code_at(values, k) != 0) as u32) << k);
                    let capture = with_value & !(win_now | lost_now);
                    let events = capture_events_of_words(values, capture);
                    set_codes(width, values, win_now, Value::Win(1).to_word());
                    set_codes(width, values, lost_now, Value::Loss(0).to_word());
                    (events, capture)
                }
            };
            report.events = report.events.union(events);
            if let Some(next_event) = own.next_event.as_deref_mut() {
                next_event[n] = first_event;
            }
            own.capture[n] = capture;
            let undecided = ALL_CARD_STATES & !(win_now | lost_now);
            if lost_now != 0 {
                sides.mark_changed(&layout);
                report.lost_at_start += lost_now.count_ones() as u64;
            }
            report.decided += (win_now | lost_now).count_ones() as u64;
            report.undecided += undecided.count_ones() as u64;
            if let (Some(image), Some(mirror)) = (&image, mirror) {
                let m = image.held_number(&place, (a, b));
                let (win_now, lost_now) = (mirror.states(win_now), mirror.states(lost_now));
                own.won[m] = win_now;
                own.lost[m] = lost_now;
                own.fresh[m] = lost_now;
                own.capture[m] = 0;
                if let Some(next_event) = own.next_event.as_deref_mut() {
                    next_event[m] = NO_EVENT;
                }
                // Its value bytes are written when the pair is finished
                // (`mirror_values`): nothing reads them before.
                if lost_now != 0 {
                    sides.mark_changed(&image.layout(&place, (a, b)));
                    report.lost_at_start += lost_now.count_ones() as u64;
                }
                report.decided += (win_now | lost_now).count_ones() as u64;
                report.undecided += undecided.count_ones() as u64;
            }
        }
    });
    report
}

/// A mirroring pair's images' value bytes, from the placements solved for
/// them (finished: every state decided or a draw), for a unit of whole
/// groups. Steps write only the solved placements' bytes: an image's lie
/// elsewhere in the group, a cache miss to write at each decision, and
/// nothing reads them before the pair is finished (an image has no
/// capture bit, so no step looks at its capture values).
pub(super) fn mirror_values(moves: &MoveTable, unit: Unit, width: ValueWidth, values: &mut [u8]) {
    let Some(mirror) = moves.mirror.as_ref() else { return };
    let (p, q) = (unit.p, unit.q);
    for_each_placement(unit.group, unit.start, unit.end, None, |i, mover, opponent, at| {
        let Mirrored::Writes(image) = mirrored(Some(mirror), &unit, i, (mover, opponent), at) else { return };
        let place = Placement::new(mover, opponent);
        for j in 0..p * q {
            let m = image.held_number(&place, (j / q, j % q));
            let (values, image_values) = layout_bytes_and_other(values, width, i * p * q + j, m);
            match width {
                ValueWidth::Byte => mirror.values(values, image_values),
                ValueWidth::Word => mirror.value_words(values, image_values),
            }
        }
    });
}

/// The depths of the capture values of states `capture` (bit k: state k)
/// among a layout's bytes, and the first of them ([`NO_EVENT`] if none):
/// a draw is no event. Once per distinct byte, the states holding it found
/// by comparing all 30 (6 men: 1.7 distinct bytes a layout against 9.2
/// states with a capture value), and without a branch per byte or a
/// read-modify-write of the set in memory (a chain of dependent stores,
/// which with the branches on each byte's kind was a fifth of
/// initialisation's samples at 6 men).
#[inline(always)]
fn capture_events(values: &[u8; CARD_STATES], capture: u32) -> (EventDepths, u8) {
    let (mut words, mut first) = ([0u64; 4], NO_EVENT);
    let mut rest = capture;
    while rest != 0 {
        let k = rest.trailing_zeros() as usize;
        rest &= !layout_bytes::states_holding(values, values[k]);
        // A draw comes out as DRAW_PLIES, dropped below.
        let plies = byte_plies(values[k]);
        let bit = 1u64 << (plies % 64);
        for (w, word) in words.iter_mut().enumerate() {
            *word |= bit & (((plies / 64) as usize == w) as u64).wrapping_neg();
        }
        first = first.min(plies as u8);
    }
    words[(DRAW_PLIES / 64) as usize] &= !(1 << (DRAW_PLIES % 64));
    (EventDepths { words, beyond: 0 }, first)
}

/// Which stored codes [`StepValues::due`] takes as due now: a win step's
/// capture wins in exactly its depth, a loss step's capture losses in its
/// depth or sooner.
#[derive(Clone, Copy)]
enum DueWhen {
    Equal(u16),
    AtMost(u16),
}

impl DueWhen {
    #[inline(always)]
    fn accepts(self, code: u16) -> bool {
        match self {
            DueWhen::Equal(due) => code == due,
            DueWhen::AtMost(due) => code <= due,
        }
    }
}

/// [`StepValues::due`] for a layout's value bytes: of `candidates`, those
/// due now, and the least plies past `depth` among the others
/// ([`NO_EVENT`] if none: a draw's plies are NO_EVENT too). On x86_64 by
/// vectors, a fixed cost, where the loop's two unpredictable branches
/// per candidate were about 2% of a 6-men run's instructions.
#[inline(always)]
fn due_bytes(bytes: &[u8; CARD_STATES], candidates: u32, depth: u16, due_now: DueWhen) -> (u32, u8) {
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    // SAFETY: this build assumes AVX2 (x86-64-v3; `main` checks the CPU
    // first, DESIGN.md "Build settings").
    let found = unsafe { due_bytes_vector(bytes, candidates, depth, due_now) };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
    let found = due_bytes_scalar(bytes, candidates, depth, due_now);
    debug_assert_eq!(found, due_bytes_scalar(bytes, candidates, depth, due_now), "the vectors agree with the loop");
    found
}

/// The definition, a candidate at a time.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "avx2", not(debug_assertions)), allow(dead_code))]
fn due_bytes_scalar(bytes: &[u8; CARD_STATES], candidates: u32, depth: u16, due_now: DueWhen) -> (u32, u8) {
    let (mut rest, mut due, mut next) = (candidates, 0, NO_EVENT);
    while rest != 0 {
        let k = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        if due_now.accepts(bytes[k] as u16) {
            due |= 1 << k;
        } else {
            let plies = byte_plies(bytes[k]);
            if plies > depth {
                next = next.min(plies as u8);
            }
        }
    }
    (due, next)
}

/// [`due_bytes`] by vectors: the due states by byte comparisons, the plies
/// of all 30 bytes as 16-bit lanes (states 0..16 and 14..30), the least
/// of the waiting ones past `depth` by a vertical then a horizontal
/// minimum.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
#[target_feature(enable = "avx2")]
#[inline]
fn due_bytes_vector(bytes: &[u8; CARD_STATES], candidates: u32, depth: u16, due_now: DueWhen) -> (u32, u8) {
    use layout_bytes::HIGH_START;
    use std::arch::x86_64::*;
    let halves = [layout_bytes::load(&bytes[..16]), layout_bytes::load(&bytes[HIGH_START..])];
    let due_in = |half: __m128i| {
        let due = match due_now {
            DueWhen::Equal(code) => _mm_cmpeq_epi8(half, _mm_set1_epi8(code as u8 as i8)),
            DueWhen::AtMost(code) => _mm_cmpeq_epi8(_mm_min_epu8(half, _mm_set1_epi8(code as u8 as i8)), half),
        };
        _mm_movemask_epi8(due) as u32
    };
    let due = (due_in(halves[0]) | due_in(halves[1]) << HIGH_START) & candidates;
    let waiting = candidates & !due;
    let lane_bits = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, i16::MIN);
    let none = _mm256_set1_epi16(-1);
    let mut least = none;
    for (half, first) in [(halves[0], 0), (halves[1], HIGH_START)] {
        // As `byte_plies`: 2 b - 2 below a draw, 511 - 2 b from it on.
        let byte = _mm256_cvtepu8_epi16(half);
        let twice = _mm256_add_epi16(byte, byte);
        let loss = _mm256_sub_epi16(twice, _mm256_set1_epi16(2));
        let win = _mm256_sub_epi16(_mm256_set1_epi16(511), twice);
        let below_draw = _mm256_cmpgt_epi16(_mm256_set1_epi16(DRAW as i16), byte);
        let plies = _mm256_blendv_epi8(win, loss, below_draw);
        let bits = _mm256_set1_epi16((waiting >> first) as u16 as i16);
        let waits = _mm256_cmpeq_epi16(_mm256_and_si256(bits, lane_bits), lane_bits);
        let later = _mm256_cmpgt_epi16(plies, _mm256_set1_epi16(depth as i16));
        least = _mm256_min_epu16(least, _mm256_blendv_epi8(none, plies, _mm256_and_si256(waits, later)));
    }
    let least = _mm_min_epu16(_mm256_castsi256_si128(least), _mm256_extracti128_si256::<1>(least));
    let least = _mm_cvtsi128_si32(_mm_minpos_epu16(least)) as u16;
    (due, least.min(NO_EVENT as u16) as u8)
}

/// The plies of a value byte other than [`NO_VALUE`], by arithmetic: a
/// loss byte b (1..=127) is a loss in 2 (b - 1) plies, a win byte a win in
/// 2 (255 - b) + 1; a draw (128) comes out as [`DRAW_PLIES`], which no
/// depth reaches (`value::MAX_WIN_PLIES`).
#[inline(always)]
fn byte_plies(byte: u8) -> u16 {
    let byte = byte as u16;
    let plies = if byte < DRAW as u16 { 2 * byte - 2 } else { 511 - 2 * byte };
    debug_assert_eq!(Value::from_byte(byte as u8).and_then(Value::plies).unwrap_or(DRAW_PLIES), plies, "byte {byte}");
    plies
}

/// [`capture_events`] of a layout's value words: a state at a time (word
/// tables are few and the fast path is the bytes').
fn capture_events_of_words(values: &[u8], capture: u32) -> (EventDepths, u8) {
    let (mut events, mut first) = (EventDepths::default(), NO_EVENT);
    let mut rest = capture;
    while rest != 0 {
        let k = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        // A draw is no event.
        if let Some(plies) = Value::from_word(value::word_at(values, k)).and_then(Value::plies) {
            events.insert(plies);
            first = first.min(next_event_byte(plies));
        }
    }
    (events, first)
}

/// What [`capture_events`] makes of a draw: past every depth.
const DRAW_PLIES: u16 = 255;
const _: () = assert!(DRAW_PLIES as u8 == NO_EVENT && DRAW_PLIES > crate::value::MAX_WIN_PLIES);

/// The values of layout `n`, and those of another layout `m` to write.
#[inline(always)]
fn layout_bytes_and_other(values: &mut [u8], width: ValueWidth, n: usize, m: usize) -> (&[u8], &mut [u8]) {
    debug_assert_ne!(n, m);
    let layout_bytes = CARD_STATES * width.bytes();
    let (low, high) = values.split_at_mut(n.max(m) * layout_bytes);
    if n < m {
        (&low[n * layout_bytes..][..layout_bytes], &mut high[..layout_bytes])
    } else {
        (&high[..layout_bytes], &mut low[m * layout_bytes..][..layout_bytes])
    }
}

/// A unit's value bytes during a step.
pub(super) enum StepValues<'a> {
    /// Resident lanes: capture values are read from the bytes, and a
    /// decided state's byte is written as it is decided. A layout's bytes
    /// are read only at its `next_event` depth (see
    /// [`ResidentLanes::next_event`](super::lanes::ResidentLanes)), which
    /// each read moves on.
    /// `width` is the bytes per state of `values`.
    Written { values: &'a mut [u8], next_event: &'a mut [u8], width: ValueWidth },
    /// Streamed lanes: bytes are neither read nor written during steps.
    /// The caller logs the states decided (see `decision_log`) and, if a
    /// capture event of the unit's group falls due at this depth, gives
    /// per layout the card states whose capture value falls due now (from
    /// the `capture_schedule`).
    Logged(Option<&'a [u32]>),
}

impl StepValues<'_> {
    /// What the unit's values store for `value` (see
    /// [`ValueWidth::encode`]). Streamed units store none, at any depth:
    /// 0, which neither [`Self::due`] nor [`Self::decide`] reads for them.
    #[inline(always)]
    fn encode(&self, value: Value) -> u16 {
        match self {
            StepValues::Written { width, .. } => width.encode(value),
            StepValues::Logged(_) => 0,
        }
    }

    /// Those of `candidates` (undecided states of layout `n` with a capture
    /// value) whose capture value falls due at `depth`: the stored code
    /// ([`Self::encode`]) satisfies `due_now` (resident), or the schedule
    /// says so (streamed).
    /// Only asked when a capture event of the group is due. The candidates
    /// not due must be all the layout's states still waiting for a capture
    /// event after the step (resident: the next event is found among them).
    #[inline(always)]
    fn due(&mut self, n: usize, candidates: u32, depth: u16, due_now: DueWhen) -> u32 {
        match self {
            StepValues::Written { values, next_event, width } => {
                // No candidates now means none ever again (`capture` and
                // the undecided states only lose states), so `next_event`
                // is left as it is: not read, it is not a cache miss.
                if candidates == 0 || u16::from(next_event[n]) > depth {
                    return 0;
                }
                if *width == ValueWidth::Byte {
                    let bytes: &[u8; CARD_STATES] =
                        values[n * CARD_STATES..][..CARD_STATES].try_into().expect("a layout's bytes");
                    let (due, next) = due_bytes(bytes, candidates, depth, due_now);
                    next_event[n] = next;
                    return due;
                }
                let (mut rest, mut due, mut next) = (candidates, 0, NO_EVENT);
                while rest != 0 {
                    let k = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    let code = width.code_at(values, n * CARD_STATES + k);
                    if due_now.accepts(code) {
                        due |= 1 << k;
                    } else if let Some(plies) = width.decode(code).and_then(Value::plies) {
                        // Events of earlier depths were met when due (the
                        // group is visited at each), so only later ones wait.
                        if plies > depth {
                            next = next.min(next_event_byte(plies));
                        }
                    }
                }
                next_event[n] = next;
                due
            }
            StepValues::Logged(Some(due)) => candidates & due[n],
            StepValues::Logged(None) => unreachable!("the schedule is read when a capture event is due"),
        }
    }

    /// Resident: asks the CPU for the value bytes of the `count` layouts
    /// from `first` on, which [`StepValues::due`] may read and
    /// [`StepValues::decide`] may write after the placement's moves are
    /// folded: they are a cache miss (the largest lane), and a decision's
    /// stores into lines not in the cache wait in the store buffer. Asked
    /// for at every visit, not only where a capture event is due (about half
    /// the visits decide something): 2% less CPU time at 6 men
    /// (docs/BENCHMARKS.md, session 68).
    #[inline(always)]
    fn prefetch_layouts(&self, first: usize, count: usize) {
        if let StepValues::Written { values, width, .. } = self {
            let layout_bytes = CARD_STATES * width.bytes();
            // Every line the bytes touch, by address: the slice need not
            // start on a line.
            let skew = values.as_ptr() as usize % CACHE_LINE_BYTES;
            let (start, end) = (first * layout_bytes + skew, (first + count) * layout_bytes + skew);
            for line in (start & !(CACHE_LINE_BYTES - 1)..end).step_by(CACHE_LINE_BYTES) {
                prefetch(&values[line.saturating_sub(skew)..]);
            }
        }
    }

    /// Records that `states` of layout `n` are decided with the value
    /// stored as `code` ([`Self::encode`]). One-byte values are blended
    /// into the layout's two vectors (`layout_bytes::set_cached`): the
    /// visit asked for the bytes before its fold
    /// ([`Self::prefetch_layouts`]), and two stores fill the store buffer
    /// less than one per state (about 12 a deciding layout at 6 men): 2%
    /// less CPU time at 6 men (docs/BENCHMARKS.md, session 68).
    #[inline(always)]
    fn decide(&mut self, n: usize, states: u32, code: u16) {
        if let StepValues::Written { values, width, .. } = self {
            let layout_bytes = CARD_STATES * width.bytes();
            set_codes_blended(*width, &mut values[n * layout_bytes..(n + 1) * layout_bytes], states, code);
        }
    }
}

/// Own lane segments of a unit in a win step.
pub(super) struct WinLanes<'a> {
    pub won: &'a mut [u32],
    /// States won by this step (streamed: what the caller logs), if kept.
    pub newly_won: Option<&'a mut [u32]>,
    pub values: StepValues<'a>,
    pub lost: &'a [u32],
    pub capture: &'a [u32],
    /// Does a capture event of the unit's group fall due at this depth?
    pub capture_due: bool,
    /// Element number, in the window's plane buffers, of the unit's first
    /// layout (streamed; it numbers the live flags).
    pub lane_start: usize,
    /// Streamed: the window's live flags (see [`is_live`]).
    pub live: Option<&'a PlacementFlags>,
}

/// Does a step look at the placement whose first layout is at `element`?
/// Not if the window holds it as no layout at all: a placement of a sparse
/// group that lists none of its layouts, whose words are not laid (see
/// `sparse`). Late in a streamed pair most placements are such, and
/// reading their words was most of a step's own work.
#[inline(always)]
fn is_live(live: Option<&PlacementFlags>, element: usize) -> bool {
    live.is_none_or(|live| live.get(element))
}

/// What a step reads besides its own segments.
#[derive(Clone, Copy)]
pub(super) struct StepInput<'a> {
    pub rules: &'a Rules,
    pub moves: &'a MoveTable,
    pub depth_plies: u16,
    /// Change flags of the material quiet moves land in.
    pub target_sides: &'a SideFlags,
    /// Change flags of the unit's own material, to mark.
    pub own_sides: &'a SideFlags,
    /// The unit's material's placements' quiet moves, if kept.
    pub kept: Option<&'a MoveLists>,
    /// The region the landing segments lie in: the whole landing lane
    /// (resident), which kept moves' [`KeptMove::offset`]s point into, or
    /// the slice buffer (streamed). [`StepInput::landing_blocks`] numbers
    /// blocks by their first element in it.
    pub landing_lane: &'a [u32],
    /// Which blocks of the landing lane hold words to read; the others
    /// are not read, and read as the step's neutral word: win steps (kept
    /// moves or streamed) fold only the blocks that may hold a `fresh`
    /// loss, streamed loss steps only those that may hold a state not won
    /// (a streamed slice buffer's other blocks hold stale words).
    pub landing_blocks: Option<&'a PlacementFlags>,
    /// Loss steps with kept moves: the unit's material's
    /// [`PlacementFlags`] of `fresh`, to clear with a placement's `fresh`
    /// words and set when a loss is written.
    pub own_fresh: Option<&'a PlacementFlags>,
    /// Steps of a mirror-closed card set: solve one placement of each
    /// mirror pair and write the other's words from it (units are then
    /// whole groups, which hold both; a part of a group, which a streamed
    /// step may solve a large group in, leaves them to
    /// [`mirror_decisions`]).
    pub mirror: Option<&'a Mirror>,
}

/// Most quiet moves of one placement: 5 pieces, 20 offsets each.
const MAX_BOARD_MOVES: usize = 5 * MAX_OFFSETS;

/// A move of one placement's boards, the same for every choice of
/// masters, with the boards-only part of its successor's number: per
/// layout only the masters' ordinals remain to add (seed 002's families:
/// the p * q layouts of a placement share their successors' boards).
#[derive(Clone, Copy)]
struct BoardMove<'a, T> {
    from: u8,
    to: u8,
    /// The successor placement's layouts (`turned_boards_part` on within
    /// the landing segment), whatever the masters.
    block: &'a [T],
}

impl<T> BoardMove<'_, T> {
    /// The mover's board after the move (before the turn), from its board
    /// before.
    #[inline(always)]
    fn moved(&self, mover: u32) -> u32 {
        mover ^ (1 << self.from) ^ (1 << self.to)
    }
}

/// A quiet board move of a placement as it is listed (and kept, see
/// [`MoveLists`]): where its successors' block starts in the landing
/// segment, so that finding it again needs no ranking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ListedMove {
    /// Layout number of the block's first layout within the landing group.
    pub base: u32,
    pub from: u8,
    pub to: u8,
    /// [`landing_slot`] of the move.
    pub landing_slot: u8,
}

/// A quiet board move of a placement as [`MoveLists`] keeps it: where its
/// successors' block starts in the landing material's resident plane
/// lanes, so that a step folds it with no landing table, no ranking and no
/// copying (copying kept moves into a list was about 15% of the
/// instructions of a 4-men run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct KeptMove {
    /// Element number, in any plane lane of the landing material, of the
    /// block's first word.
    pub offset: u32,
    pub from: u8,
    pub to: u8,
    /// The card slots with this move's offset.
    pub cards: u8,
    /// Does the moving piece pass another of the mover's pieces?
    pub crossing: bool,
}

/// One placement's kept quiet moves and the card slots with any move at all.
#[derive(Clone, Copy)]
pub(super) struct KeptMoves<'a> {
    pub moves: &'a [KeptMove],
    pub cards_with_moves: u8,
}

impl MoveTable {
    /// The kept form of a listed move of the mover's board `mover` whose
    /// landing group's segment starts at element `segment_start` of the
    /// landing lanes.
    pub(super) fn kept_move(&self, m: &ListedMove, mover: u32, segment_start: usize) -> KeptMove {
        let offset = u32::try_from(segment_start + m.base as usize).expect("landing lanes fit 32-bit offsets");
        let target = self.target(m.from, m.to);
        KeptMove { offset, from: m.from, to: m.to, cards: target.cards, crossing: target.crosses(mover) }
    }
}

/// Calls `visit(move, landing segment)` for every quiet board move of a
/// placement, in square order of (from, to); returns the card slots with
/// any move at all (captures and wins included).
#[inline(always)]
pub(super) fn for_each_quiet_move<'a, T>(
    moves: &MoveTable,
    landing: &Landing<'a, T>,
    mover: u32,
    opponent: u32,
    mut visit: impl FnMut(ListedMove, &'a [T]),
) -> u8 {
    let mut cards_with_moves = 0u8;
    let rows = TurnedRows::new(mover, opponent);
    let mut pieces = mover;
    while pieces != 0 {
        let from = pieces.trailing_zeros() as u8;
        pieces &= pieces - 1;
        cards_with_moves |= moves.cards_moving(from, mover);
        let (lifted, from_row) = (mover ^ (1 << from), (from / 5) as usize);
        let mut quiet = moves.reach[from as usize] & !(mover | opponent);
        // Row by row: the piece's moves into one row share their landing
        // group and every other row's part of the rank, counted once per
        // row instead of per move (2.4% fewer instructions for streamed
        // 4 men, docs/BENCHMARKS.md, session 81).
        while quiet != 0 {
            let to_row = (quiet.trailing_zeros() / 5) as usize;
            let row_squares = ROW_SQUARES << (5 * to_row);
            let mut into_row = quiet & row_squares;
            quiet &= !row_squares;
            let landing_slot = landing_slot_of_rows(from_row, to_row);
            let (group, segment) = landing.get(landing_slot);
            let rows_except = landing.index.turned_rows_part_except(group, &rows, lifted, from_row, to_row);
            while into_row != 0 {
                let to = into_row.trailing_zeros() as u8;
                into_row &= into_row - 1;
                debug_assert_eq!(landing_slot, self::landing_slot(from, to));
                let moved = lifted ^ (1 << to);
                let base = landing.index.turned_boards_part_landed(group, &rows, rows_except, moved, to_row);
                debug_assert!(base < group.layouts);
                visit(ListedMove { base: base as u32, from, to, landing_slot }, segment);
            }
        }
    }
    cards_with_moves
}

/// Number of quiet board moves of a placement.
#[inline]
pub(super) fn count_quiet_moves(moves: &MoveTable, mover: u32, opponent: u32) -> usize {
    let mut count = 0;
    let mut pieces = mover;
    while pieces != 0 {
        let from = pieces.trailing_zeros() as usize;
        pieces &= pieces - 1;
        count += (moves.reach[from] & !(mover | opponent)).count_ones() as usize;
    }
    count
}

/// Layouts of one placement: p * q of them, numbered `a * q + b` for the
/// mover's master being its a-th piece and the opponent's its b-th (pieces
/// in square order), as the index numbers them.
struct Placement {
    mover: u32,
    opponent: u32,
}

/// Most layouts of one placement: five masters' choices per side.
const MAX_PLACEMENT_LAYOUTS: usize = MAX_PIECES_PER_SIDE * MAX_PIECES_PER_SIDE;

impl Placement {
    #[inline(always)]
    fn new(mover: u32, opponent: u32) -> Placement {
        Placement { mover, opponent }
    }

    /// The square of the mover's `a`-th piece (in square order). Found
    /// when asked, not at every visit: steps ask only for the layouts they
    /// decide (with a branchless `nth_square`, 0.4% fewer instructions at
    /// 6 men and 1.3% at 4 than squares listed at every visit,
    /// docs/BENCHMARKS.md, session 76).
    #[inline(always)]
    fn mover_square(&self, a: usize) -> u8 {
        nth_square(self.mover, a as u32)
    }

    /// The square of the opponent's `b`-th piece.
    #[inline(always)]
    fn opponent_square(&self, b: usize) -> u8 {
        nth_square(self.opponent, b as u32)
    }

    #[inline(always)]
    fn layout(&self, a: usize, b: usize) -> Layout {
        Layout {
            mover: self.mover,
            opponent: self.opponent,
            mover_master: self.mover_square(a),
            opponent_master: self.opponent_square(b),
        }
    }
}

/// What a mirroring step does with a placement ([`StepInput::mirror`]).
enum Mirrored {
    /// Solves it, and nothing else: the step does not mirror, or the
    /// placement is its own image.
    Own,
    /// Solves it, and writes its image's words if the unit holds them
    /// ([`Image::first`]).
    Writes(Image),
    /// Nothing: it is the image of a placement solved before it in its
    /// group, which wrote (or leaves to [`mirror_decisions`]) its words.
    Skipped,
}

/// A placement's mirror image, as the placement solved for it sees it.
/// Small, so that moving it costs nothing: the layouts, and the image's
/// boards, are found when a state is decided, not before (the boards
/// mirrored at every visit were about 1% of a 6-men run's instructions).
#[derive(Clone, Copy)]
struct Image {
    /// Its first layout, counted from the unit's first, if the unit holds
    /// the image's words: a unit that is a whole group does. A unit that is
    /// a part of its group (a streamed step solves a job's large groups in
    /// parts) writes none, since another part may hold them;
    /// [`mirror_decisions`] writes them from the placement's once all the
    /// group's parts have run.
    first: Option<usize>,
}

impl Image {
    /// The mirror image of layout (a, b) of `place` (the masters'
    /// ordinals), as a layout.
    #[inline(always)]
    fn layout(&self, place: &Placement, (a, b): (usize, usize)) -> Layout {
        let mover_master = mirror::square(place.mover_square(a));
        let opponent_master = mirror::square(place.opponent_square(b));
        let (mover, opponent) = (mirror::board(place.mover), mirror::board(place.opponent));
        Layout { mover, opponent, mover_master, opponent_master }
    }

    /// The image of layout (a, b) of `place` (the masters' ordinals): its
    /// number counted from the unit's first (if the unit holds it), and
    /// the ordinal of its mover's master.
    #[inline(always)]
    fn number(&self, place: &Placement, a: usize, b: usize) -> (Option<usize>, usize) {
        let q = place.opponent.count_ones() as usize;
        let mover_ordinal = mirror::image_ordinal(place.mover, place.mover_square(a));
        let opponent_ordinal = mirror::image_ordinal(place.opponent, place.opponent_square(b));
        (self.first.map(|first| first + mover_ordinal * q + opponent_ordinal), mover_ordinal)
    }

    /// [`Image::number`] in a unit that holds the image: a whole group's
    /// (initialisation and finishing work whole groups only).
    #[inline(always)]
    fn held_number(&self, place: &Placement, (a, b): (usize, usize)) -> usize {
        self.number(place, a, b).0.expect("a whole group's unit holds its images")
    }
}

/// What a step (or initialisation) with `mirror` does with placement `i`
/// of `unit` (see [`Mirrored`]), the odometer being `at` it. Solved is the
/// one of each pair that comes first in the group.
#[inline(always)]
fn mirrored(mirror: Option<&Mirror>, unit: &Unit, i: usize, (mover, opponent): (u32, u32), at: &Odometer) -> Mirrored {
    if mirror.is_none() {
        return Mirrored::Own;
    }
    let image = at.image_number();
    if image == unit.start + i as u64 {
        return Mirrored::Own;
    }
    if image < unit.start + i as u64 {
        return Mirrored::Skipped;
    }
    debug_assert_eq!(mirror::image_number(unit.group, mover, opponent), Some(image));
    let first = unit.is_whole_group().then(|| image as usize * unit.p * unit.q);
    Mirrored::Writes(Image { first })
}

/// The quiet board moves of one placement (captures are left out: they win
/// or were folded in at initialisation), and the card slots with any move
/// at all, listed once for all the layouts of the placement.
struct PlacementMoves<'a> {
    count: usize,
    cards_with_moves: u8,
    list: [BoardMove<'a, u32>; MAX_BOARD_MOVES],
}

impl<'a> PlacementMoves<'a> {
    fn new() -> PlacementMoves<'a> {
        let empty = BoardMove { from: 0, to: 0, block: &[][..] };
        PlacementMoves { count: 0, cards_with_moves: 0, list: [empty; MAX_BOARD_MOVES] }
    }

    /// Lists the placement's quiet moves, with `only_flagged` only those
    /// into blocks (of that landing lane) whose flag is set: the others
    /// read as the step's neutral word, which changes no fold.
    fn list_moves(
        &mut self,
        moves: &MoveTable,
        landing: &Landing<'a, u32>,
        (mover, opponent): (u32, u32),
        only_flagged: Option<(&PlacementFlags, &[u32])>,
    ) {
        // One listing loop each, so that a listing without flags tests
        // none, and one with flags finds them from their lane's start
        // worked out once.
        match only_flagged {
            None => self.list_moves_where(moves, landing, (mover, opponent), |_| true),
            Some((flags, lane)) => {
                let flags = flags.in_lane(lane);
                self.list_moves_where(moves, landing, (mover, opponent), |block| flags.get(block))
            }
        }
    }

    /// [`PlacementMoves::list_moves`], counting the moves whose block is
    /// `flagged`.
    #[inline(always)]
    fn list_moves_where(
        &mut self,
        moves: &MoveTable,
        landing: &Landing<'a, u32>,
        (mover, opponent): (u32, u32),
        flagged: impl Fn(&[u32]) -> bool,
    ) {
        let mut n = 0;
        let block_layouts = (mover.count_ones() * opponent.count_ones()) as usize;
        self.cards_with_moves = for_each_quiet_move(moves, landing, mover, opponent, |m, segment| {
            let block = &segment[m.base as usize..m.base as usize + block_layouts];
            let flagged = flagged(block);
            prefetch(block);
            // Written whether flagged or not, counted only if flagged: about
            // half the blocks of a streamed win step are zero, in no order a
            // branch could predict. (Folding a zero block for them
            // instead, as kept moves do, made streamed 6-men runs 5-8%
            // slower: docs/BENCHMARKS.md, session 30.)
            self.list[n] = BoardMove { from: m.from, to: m.to, block };
            n += flagged as usize;
        });
        self.count = n;
    }

    /// Lists the placement's moves if `listing` says they are listed now
    /// (only those into flagged blocks if the listing has flags), asking
    /// for their blocks; asks for the blocks of its kept moves if they are
    /// kept; else nothing. [`PlacementMoves::fold_listed`] folds them.
    #[inline(always)]
    fn list(&mut self, moves: &MoveTable, landing: &Landing<'a, u32>, place: &Placement, listing: Listing) {
        match listing {
            Listing::Now(only_flagged) => self.list_moves(moves, landing, (place.mover, place.opponent), only_flagged),
            // Kept blocks are scattered over the landing slice: ask for all
            // of them, a placement before they are folded, each by its
            // first and its last line (a block of p * q words straddles
            // two lines more often than not: at 3v3's 9 words, from 8 of
            // the 16 places it can start in a line). Asking a placement
            // ahead, and then for the last line too, each made the
            // in-memory 6-men run faster (docs/BENCHMARKS.md, session 85).
            // No bounds checks: an element out of bounds only asks for
            // some other line.
            Listing::Kept(kept, lane, _) => {
                let last = (place.mover.count_ones() * place.opponent.count_ones()) as usize - 1;
                for m in kept.moves {
                    crate::cache_hint::prefetch_element(lane, m.offset as usize);
                    crate::cache_hint::prefetch_element(lane, m.offset as usize + last);
                }
            }
            Listing::Unneeded => {}
        }
    }

    /// Unless the moves are not needed, folds every successor word of the
    /// moves [`PlacementMoves::list`] listed (or of the kept list, only the
    /// moves into flagged blocks if the listing has flags) into one
    /// accumulator per layout (by [`successor_slot`]), starting from
    /// `start`: `fold(acc, word, successor_states)`. Returns the
    /// accumulators and the card states with no move at all (all of them,
    /// unlisted, when not needed: nothing looks at them then).
    #[inline(always)]
    fn fold_listed(
        &self,
        moves: &MoveTable,
        place: &Placement,
        listing: Listing,
        start: u32,
        fold: impl Fn(u32, u32, u32) -> u32,
    ) -> ([u32; MAX_PLACEMENT_LAYOUTS], u32) {
        let mut acc = [start; MAX_PLACEMENT_LAYOUTS];
        let (p, q) = (place.mover.count_ones() as usize, place.opponent.count_ones() as usize);
        match listing {
            Listing::Unneeded => return (acc, ALL_CARD_STATES),
            Listing::Now(_) => {}
            Listing::Kept(kept, lane, only_flagged) => {
                debug_assert!(only_flagged.is_none() || start == 0, "kept moves have flags in win steps only");
                fold_kept(moves, place, kept.moves, lane, only_flagged, |slot, word, states| {
                    acc[slot] = fold(acc[slot], word, states)
                });
                return (acc, ALL_CARD_STATES & !moves.holding_any(kept.cards_with_moves));
            }
        }
        self.for_each_successor(moves, place, (p, q), |slot, word, states| acc[slot] = fold(acc[slot], word, states));
        (acc, ALL_CARD_STATES & !moves.holding_any(self.cards_with_moves))
    }

    /// Calls `visit(slot, word, successor_states)` for every listed move
    /// and every layout of the placement, with the landing word of that
    /// layout's successor; layouts are given by their [`successor_slot`].
    ///
    /// A move's successors are the p * q layouts of one successor placement:
    /// layout (a, b) lands on the successor's master choice
    /// ((q - 1 - b), ordinal of the mover's master after the move, counted
    /// from the top once turned), so each move reads one contiguous block.
    /// Unless the moving piece passes another, that ordinal is p - 1 - a
    /// and slot s reads word s of the block (a loop the compiler
    /// vectorises). A master's move onto the temple lands on a game-over
    /// hole, which reads as won and never fresh: it changes nothing, and
    /// those states won in one anyway.
    ///
    /// A move's successor states and whether it passes a piece are looked
    /// up here, not when it is listed: a win step lists every move and
    /// folds only those into flagged blocks.
    #[inline(always)]
    fn for_each_successor(
        &self,
        moves: &MoveTable,
        place: &Placement,
        (p, q): (usize, usize),
        mut visit: impl FnMut(usize, u32, u32),
    ) {
        for m in &self.list[..self.count] {
            let target = moves.target(m.from, m.to);
            if !target.crosses(place.mover) {
                visit_words(m.block, target.successor_states, &mut visit);
                continue;
            }
            let ends = (m.from, m.to, m.moved(place.mover));
            visit_crossing(&moves.crossing, place, (p, q), ends, m.block, target.successor_states, &mut visit);
        }
    }
}

/// The words of a block for a move whose piece passes another of the
/// mover's pieces (`(from, to, moved)`, `moved` the mover's board after
/// it): the masters' ordinals change, so each layout finds its word by
/// where its master ends up (see [`PlacementMoves::for_each_successor`]).
/// The block is first put in the order of the placement's layouts
/// ([`CrossingTable::permuted`]: byte shuffles, where finding each
/// layout's word in turn took about 30% of the folds' cycles at 6 men,
/// for 18% of the moves), then folded as other blocks are.
#[inline(always)]
fn visit_crossing(
    crossing: &CrossingTable,
    place: &Placement,
    (p, q): (usize, usize),
    (from, to, moved): (u8, u8, u32),
    block: &[u32],
    states: u32,
    visit: &mut impl FnMut(usize, u32, u32),
) {
    debug_assert_eq!(block.len(), p * q, "a block holds p * q words");
    let ordinals = crossing_ordinals(place, (from, to, moved));
    // As in `visit_words`: a fixed length for the blocks of the largest
    // materials of each size.
    with_block_words!(block.len(), N => visit_crossing_block::<N>(crossing, (p, q), ordinals, block, states, visit), {
        visit_words(&crossing::permuted_scalar(block, p, ordinals)[..block.len()], states, visit)
    })
}

/// The moving piece's ordinals among the mover's pieces before and after a
/// crossing move (`(from, to, moved)`, `moved` the mover's board after it).
#[inline(always)]
fn crossing_ordinals(place: &Placement, (from, to, moved): (u8, u8, u32)) -> (usize, usize) {
    ((place.mover & ((1 << from) - 1)).count_ones() as usize, (moved & ((1 << to) - 1)).count_ones() as usize)
}

/// [`visit_crossing`] for blocks of N words.
#[inline(always)]
fn visit_crossing_block<const N: usize>(
    crossing: &CrossingTable,
    (p, q): (usize, usize),
    ordinals: (usize, usize),
    block: &[u32],
    states: u32,
    visit: &mut impl FnMut(usize, u32, u32),
) {
    let block: &[u32; N] = block.try_into().expect("a block holds p * q words");
    visit_block::<N>(&crossing.permuted(block, (p, q), ordinals)[..N], states, visit);
}

/// [`PlacementMoves::for_each_successor`] for a placement's kept moves,
/// read straight from the landing lane. With `only_flagged`, blocks whose
/// [`PlacementFlags`] flag is clear (a win step's: they hold only zero
/// words) are read as a zero block instead ([`flagged_or_zero`]). The
/// blocks were asked for when the visit was listed ([`PlacementMoves::list`]).
#[inline(always)]
fn fold_kept(
    moves: &MoveTable,
    place: &Placement,
    kept: &[KeptMove],
    lane: &[u32],
    only_flagged: Option<&PlacementFlags>,
    mut visit: impl FnMut(usize, u32, u32),
) {
    let (p, q) = (place.mover.count_ones() as usize, place.opponent.count_ones() as usize);
    let block_layouts = p * q;
    let kept_blocks = (kept, lane, only_flagged);
    with_block_words!(block_layouts, N => fold_kept_blocks::<N>(moves, place, (p, q), kept_blocks, &mut visit), {
        for m in kept {
            let start = m.offset as usize;
            let block = &lane[start..start + block_layouts];
            let flagged = only_flagged.is_none_or(|flags| flags.get(start));
            debug_assert!(flagged || block.iter().all(|&word| word == 0), "a clear flag means a zero block");
            let block = flagged_or_zero(flagged, block);
            let states = kept_states(moves, m);
            if !m.crossing {
                visit_words(block, states, &mut visit);
                continue;
            }
            let moved = place.mover ^ (1 << m.from) ^ (1 << m.to);
            visit_crossing(&moves.crossing, place, (p, q), (m.from, m.to, moved), block, states, &mut visit);
        }
    });
}

/// [`fold_kept`] for blocks of N = p * q words: the length chosen once for
/// all the kept moves, not at each move, and the zero block chosen by
/// address alone.
#[inline(always)]
fn fold_kept_blocks<const N: usize>(
    moves: &MoveTable,
    place: &Placement,
    (p, q): (usize, usize),
    (kept, lane, only_flagged): (&[KeptMove], &[u32], Option<&PlacementFlags>),
    visit: &mut impl FnMut(usize, u32, u32),
) {
    let zero: &[u32; N] = ZERO_BLOCK[..N].try_into().expect("the zero block is the longest");
    for m in kept {
        let start = m.offset as usize;
        let block: &[u32; N] = lane[start..start + N].try_into().expect("a block holds p * q words");
        let flagged = only_flagged.is_none_or(|flags| flags.get(start));
        debug_assert!(flagged || block.iter().all(|&word| word == 0), "a clear flag means a zero block");
        let block = std::hint::select_unpredictable(flagged, block, zero);
        let states = kept_states(moves, m);
        if !m.crossing {
            visit_block::<N>(block, states, visit);
            continue;
        }
        let moved = place.mover ^ (1 << m.from) ^ (1 << m.to);
        let ordinals = crossing_ordinals(place, (m.from, m.to, moved));
        visit_crossing_block::<N>(&moves.crossing, (p, q), ordinals, block, states, visit);
    }
}

/// The successor card states of a kept move.
#[inline(always)]
fn kept_states(moves: &MoveTable, m: &KeptMove) -> u32 {
    // Masked to the table's length, so the look-up needs no bounds check.
    moves.successor_states[m.cards as usize & ((1 << CARDS_PER_GAME) - 1)]
}

/// A block of zero words as long as the longest (p * q = 25): what a win
/// step's block with a clear flag reads as, which changes no OR.
static ZERO_BLOCK: [u32; MAX_PLACEMENT_LAYOUTS] = [0; MAX_PLACEMENT_LAYOUTS];

/// `block` if its flag is set, else as many words of [`ZERO_BLOCK`] (a read
/// from a line the cache holds, not from the landing lane). Chosen without
/// a branch: about half the blocks of a win step are clear, in no order a
/// branch could predict.
#[inline(always)]
fn flagged_or_zero(flagged: bool, block: &[u32]) -> &[u32] {
    std::hint::select_unpredictable(flagged, block, &ZERO_BLOCK[..block.len()])
}

/// Runs `$fixed` with the const `$n` set to `$words` where that is one of
/// the block lengths worth a loop of fixed length (p * q of the biggest
/// materials of each size), else `$other`.
macro_rules! with_block_words {
    ($words:expr, $n:ident => $fixed:expr, $other:expr) => {
        match $words {
            4 => {
                const $n: usize = 4;
                $fixed
            }
            6 => {
                const $n: usize = 6;
                $fixed
            }
            8 => {
                const $n: usize = 8;
                $fixed
            }
            9 => {
                const $n: usize = 9;
                $fixed
            }
            12 => {
                const $n: usize = 12;
                $fixed
            }
            15 => {
                const $n: usize = 15;
                $fixed
            }
            16 => {
                const $n: usize = 16;
                $fixed
            }
            20 => {
                const $n: usize = 20;
                $fixed
            }
            25 => {
                const $n: usize = 25;
                $fixed
            }
            _ => $other,
        }
    };
}
use with_block_words;

/// `visit(slot, word, states)` for every word of a block, in order.
#[inline(always)]
fn visit_words(block: &[u32], states: u32, visit: &mut impl FnMut(usize, u32, u32)) {
    // A fixed length lets the compiler unroll and vectorise the fold (the
    // unvectorised loop was about 3% more instructions at 4 men).
    with_block_words!(block.len(), N => visit_block::<N>(block, states, visit), {
        for (slot, &word) in block.iter().enumerate() {
            visit(slot, word, states);
        }
    })
}

/// `visit(slot, word, states)` for the N words of a block.
#[inline(always)]
fn visit_block<const N: usize>(block: &[u32], states: u32, visit: &mut impl FnMut(usize, u32, u32)) {
    let block: &[u32; N] = block.try_into().expect("a block holds p * q words");
    for (slot, &word) in block.iter().enumerate() {
        visit(slot, word, states);
    }
}

/// The masters' ordinals (a, b) of layout `j` = a * q + b of a placement
/// whose opponent has `q` pieces, by table (no division).
#[inline(always)]
fn masters_of(q: usize, j: usize) -> (usize, usize) {
    const TABLE: [[(u8, u8); MAX_PLACEMENT_LAYOUTS]; MAX_PIECES_PER_SIDE + 1] = {
        let mut table = [[(0, 0); MAX_PLACEMENT_LAYOUTS]; MAX_PIECES_PER_SIDE + 1];
        let mut q = 1;
        while q <= MAX_PIECES_PER_SIDE {
            let mut j = 0;
            while j < MAX_PLACEMENT_LAYOUTS {
                table[q][j] = ((j / q) as u8, (j % q) as u8);
                j += 1;
            }
            q += 1;
        }
        table
    };
    let (a, b) = TABLE[q][j];
    (a as usize, b as usize)
}

/// Calls `visit(j, a, b)` for each layout j = a * q + b of a placement in
/// `layouts` (bit j), in order.
#[inline(always)]
fn for_each_layout(layouts: u32, q: usize, mut visit: impl FnMut(usize, usize, usize)) {
    for_each_bit(layouts, |j| {
        let (a, b) = masters_of(q, j);
        visit(j, a, b);
    });
}

/// Calls `visit(j)` for each layout j of a placement in `layouts` (bit
/// j), in order: [`for_each_layout`] where the masters' ordinals are
/// seldom asked for (they were a table look-up for each of the steps'
/// 160 M open layouts at 6 men).
#[inline(always)]
fn for_each_bit(layouts: u32, mut visit: impl FnMut(usize)) {
    let mut rest = layouts;
    while rest != 0 {
        let j = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        visit(j);
    }
}

/// The landing word of the pass successor of layout (a, b) of `place` (no
/// piece moves, the cards change), or `neutral` where the landing lane's
/// block flags say its block is not to be read ([`landing_word`]).
#[inline(always)]
fn pass_word(
    input: &StepInput,
    landing: &Landing<u32>,
    place: &Placement,
    (a, b): (usize, usize),
    neutral: u32,
) -> u32 {
    let layout = place.layout(a, b);
    let at = layout.mover_master;
    let (next, segment) = landing.find(&layout, at, at, 0);
    landing_word((input.landing_blocks, input.landing_lane), segment, next, neutral)
}

/// Where [`PlacementMoves::for_each_successor`] reports layout (a, b) of a
/// placement: the slot its successors take in their blocks when no piece
/// passes another.
#[inline(always)]
const fn successor_slot(p: usize, q: usize, a: usize, b: usize) -> usize {
    (q - 1 - b) * p + (p - 1 - a)
}

/// [`successor_slot`] of each layout j = a * q + b of a placement of a
/// (p, q) material, by table: the steps ask for it for every open layout
/// they look at, and the arithmetic was about 0.9% of a 6-men run's
/// instructions.
fn successor_slots(p: usize, q: usize) -> &'static [u8; MAX_PLACEMENT_LAYOUTS] {
    static TABLE: [[[u8; MAX_PLACEMENT_LAYOUTS]; MAX_PIECES_PER_SIDE + 1]; MAX_PIECES_PER_SIDE + 1] = {
        let mut table = [[[0u8; MAX_PLACEMENT_LAYOUTS]; MAX_PIECES_PER_SIDE + 1]; MAX_PIECES_PER_SIDE + 1];
        let mut p = 1;
        while p <= MAX_PIECES_PER_SIDE {
            let mut q = 1;
            while q <= MAX_PIECES_PER_SIDE {
                let mut j = 0;
                while j < p * q {
                    table[p][q][j] = successor_slot(p, q, j / q, j % q) as u8;
                    j += 1;
                }
                q += 1;
            }
            p += 1;
        }
        table
    };
    &TABLE[p][q]
}

/// Asks the CPU to start loading a successor block: a placement's blocks
/// are scattered over the landing segments, and the fold reads them only
/// after all moves are listed (about 10% of the steps' time, measured in
/// docs/BENCHMARKS.md). Only the block's first line: asking for its last
/// too, as kept moves do (`PlacementMoves::list`), did not make 8-men
/// 4v4's streamed steps faster (docs/BENCHMARKS.md, session 85).
#[inline(always)]
fn prefetch<T>(block: &[T]) {
    crate::cache_hint::prefetch(block)
}

/// Asks for the lines of `count` words of `lane` from `first` on (a
/// placement's: at most 25 words, so its first and last lines).
#[inline(always)]
fn prefetch_words(lane: &[u32], first: usize, count: usize) {
    prefetch(&lane[first..]);
    prefetch(&lane[first + count - 1..]);
}

/// The landing word of layout `n` of a landing group's `segment` (read
/// by a pass, whose successor is found by ranking, not listed), or
/// `neutral` where the landing lane's block flags ([`StepInput::landing_blocks`])
/// say its block is not to be read.
#[inline(always)]
fn landing_word((blocks, lane): (Option<&PlacementFlags>, &[u32]), segment: &[u32], n: usize, neutral: u32) -> u32 {
    match blocks {
        // A group holds whole blocks, so the block starts in the segment.
        Some(flags) if !flags.get(element_in(lane, &segment[n - n % flags.block_words()..])) => neutral,
        _ => segment[n],
    }
}

/// The element of `lane` that `block` starts at (`block` lies in `lane`).
#[inline(always)]
fn element_in(lane: &[u32], block: &[u32]) -> usize {
    debug_assert!(lane.as_ptr_range().contains(&block.as_ptr()), "the block lies in the landing lane");
    (block.as_ptr() as usize - lane.as_ptr() as usize) / std::mem::size_of::<u32>()
}

/// Squares strictly between two squares, in square order.
#[inline(always)]
fn between(from: u8, to: u8) -> u32 {
    let (low, high) = (from.min(to), from.max(to));
    ((1u32 << high) - 1) & !((2u32 << low) - 1)
}

/// Index within its block of a board move's successor for one layout;
/// `moved` is the mover's board after the move, `turned_opponent` the
/// layout's part (its opponent master's ordinal times the target's
/// opponent count).
#[inline(always)]
fn board_successor<T>(m: &BoardMove<T>, moved: u32, mover_master: u8, turned_opponent: usize) -> usize {
    let master = if m.from == mover_master { m.to } else { mover_master };
    turned_opponent + (moved >> master >> 1).count_ones() as usize
}

/// Calls `visit(i, mover, opponent, at)` for placements `start..end` of a
/// group, i counting from 0; placement i holds layouts i * p * q onwards,
/// and `at` is the odometer at it (which numbers its mirror image,
/// [`Odometer::image_number`], when asked).
#[inline(always)]
fn for_each_placement(
    group: &Group,
    start: u64,
    end: u64,
    live: Live,
    mut visit: impl FnMut(usize, u32, u32, &Odometer),
) {
    let mut odometer = group.odometer(start.min(end));
    let Some((flags, lane_start)) = live else {
        for i in 0..(end.saturating_sub(start)) as usize {
            let (mover, opponent) = odometer.boards();
            visit(i, mover, opponent, &odometer);
            odometer.advance();
        }
        return;
    };
    let placements = (end - start) as usize;
    // The placement the odometer is at.
    let mut at = 0;
    let mut from = 0;
    while let Some(i) = flags.next_set(lane_start, from, placements) {
        if i - at > SEEK_AFTER_PLACEMENTS {
            odometer.seek(start + i as u64);
        } else {
            (at..i).for_each(|_| odometer.advance());
        }
        at = i;
        let (mover, opponent) = odometer.boards();
        visit(i, mover, opponent, &odometer);
        from = i + 1;
    }
}

/// A streamed step's live flags and the element of the unit's first
/// layout ([`is_live`]); `None`: every placement is looked at.
pub(super) type Live<'a> = Option<(&'a PlacementFlags, usize)>;

/// How far [`for_each_placement`] moves the odometer on to the next live
/// placement before it decodes that placement's digits instead (a
/// division per row, five, against a table look-up or two per step).
const SEEK_AFTER_PLACEMENTS: usize = 8;

/// How a step gets the moves of a placement.
#[derive(Clone, Copy)]
enum Listing<'a> {
    /// No layout of the placement looks at its moves.
    Unneeded,
    /// Listed at this visit, with the flags of the blocks to fold (and
    /// the landing lane they number) if only some are.
    Now(Option<(&'a PlacementFlags, &'a [u32])>),
    /// Kept from before the first step, with the landing lane, and the
    /// flags of the blocks to fold if only some are.
    Kept(KeptMoves<'a>, &'a [u32], Option<&'a PlacementFlags>),
}

/// How the step gets the moves of placement `placement` of the material
/// (in index order, all groups).
#[inline(always)]
fn listing<'a>(input: &StepInput<'a>, placement: usize, needed: bool) -> Listing<'a> {
    match input.kept {
        _ if !needed => Listing::Unneeded,
        // Win steps: blocks without a fresh loss add nothing to an OR.
        Some(lists) => Listing::Kept(lists.placement(placement), input.landing_lane, input.landing_blocks),
        None => Listing::Now(input.landing_blocks.map(|flags| (flags, input.landing_lane))),
    }
}

/// The material's number of the unit's first placement (in index order).
fn first_placement(unit: &Unit) -> usize {
    (unit.group.first_layout / (unit.p * unit.q) as u64 + unit.start) as usize
}

/// A placement a step has listed the moves of (or chosen not to), waiting
/// for its fold and decisions until the next placement is listed
/// ([`for_each_placement_listed_ahead`]).
struct ListedVisit<'a> {
    /// The placement's first layout, counted from the unit's first.
    first: usize,
    place: Placement,
    image: Option<Image>,
    /// Its undecided card states by layout, and its undecided layouts.
    undecided: [u32; UNDECIDED_WORDS],
    open: u32,
    /// The layouts a win step looks at (those whose successors' side
    /// changed in the last step); a loss step looks at every open one.
    looked_layouts: u32,
    listing: Listing<'a>,
}

/// The two halves of a step's visit: `list` (its checks and the listing of
/// its moves, which asks for their landing blocks; `None` if there is
/// nothing to fold) and `fold` (the fold and the decisions). Methods, not
/// closures, so that they and the closures inside them are inlined at
/// their one call in the walk: as two closures called from the walk's,
/// resident steps ran 6.5% more instructions at 4 men (docs/BENCHMARKS.md,
/// session 83).
trait VisitHalves<'l, 'i> {
    fn list(
        &mut self,
        listed: &mut PlacementMoves<'l>,
        i: usize,
        boards: (u32, u32),
        at: &Odometer,
    ) -> Option<ListedVisit<'i>>;
    fn fold(&mut self, listed: &PlacementMoves<'l>, visit: ListedVisit<'i>);
}

/// [`for_each_placement`] with each visit in its two halves
/// ([`VisitHalves`]): a visit's `fold` runs after the next visit's
/// `list`, so the blocks one visit asks for (listed now, or kept) arrive
/// while the visit before it is folded instead of while the listing's own
/// fold waits for them.
///
/// A visit's `fold` may write only its placement's words and its image's
/// (which lies later in the group and is never listed), and words no
/// `list` reads: the next visit was listed before it.
#[inline(always)]
fn for_each_placement_listed_ahead<'l, 'i>(unit: &Unit, live: Live, visits: &mut impl VisitHalves<'l, 'i>) {
    let mut listings = [PlacementMoves::new(), PlacementMoves::new()];
    let mut waiting: Option<ListedVisit<'i>> = None;
    // The list the next visit lists into: the other holds the waiting
    // visit's.
    let mut next = 0;
    // One body for every visit and for the walk's end (`None`), so that
    // `fold`, and the closures inside it, is inlined once.
    let mut visit = |placement: Option<(usize, (u32, u32), &Odometer)>| {
        let listed = match placement {
            Some((i, boards, at)) => {
                // Nothing to fold: the waiting visit waits on.
                let Some(listed) = visits.list(&mut listings[next], i, boards, at) else { return };
                Some(listed)
            }
            // The walk's end: only the waiting visit is left to fold.
            None => None,
        };
        let folded = std::mem::replace(&mut waiting, listed);
        // Now the list the waiting visit was listed into.
        next = 1 - next;
        if let Some(folded) = folded {
            visits.fold(&listings[next], folded);
        }
    };
    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {
        visit(Some((i, (mover, opponent), at)))
    });
    visit(None);
}

/// Odd step: states that can move into a loss in `depth - 1` plies win in
/// `depth`. `landing` holds the `fresh` segments of the material moved into.
pub(super) fn win_step<'i, 'l>(
    input: &StepInput<'i>,
    unit: Unit,
    landing: &Landing<'l, u32>,
    own: WinLanes,
) -> UnitReport {
    let live = own.live.map(|flags| (flags, own.lane_start));
    // A part of a group leaves its images' words to its caller: only a
    // streamed step's (`mirror_decisions`, from the new wins it keeps).
    debug_assert!(input.mirror.is_none() || unit.is_whole_group() || own.newly_won.is_some());
    let win_code = own.values.encode(Value::Win(input.depth_plies));
    let first_placement = first_placement(&unit);
    let mut visits =
        WinVisits { input, unit: &unit, landing, own, report: UnitReport::default(), win_code, first_placement };
    for_each_placement_listed_ahead(&unit, live, &mut visits);
    visits.report
}

/// A win step's unit, visited a placement at a time ([`VisitHalves`]).
struct WinVisits<'s, 'i, 'l> {
    input: &'s StepInput<'i>,
    unit: &'s Unit<'s>,
    landing: &'s Landing<'l, u32>,
    own: WinLanes<'s>,
    report: UnitReport,
    win_code: u16,
    first_placement: usize,
}

impl<'i, 'l> VisitHalves<'l, 'i> for WinVisits<'_, 'i, 'l> {
    #[inline(always)]
    fn list(
        &mut self,
        listed: &mut PlacementMoves<'l>,
        i: usize,
        (mover, opponent): (u32, u32),
        at: &Odometer,
    ) -> Option<ListedVisit<'i>> {
        let WinVisits { input, unit, landing, own, first_placement, .. } = self;
        let (input, unit, landing, first_placement) = (*input, *unit, *landing, *first_placement);
        let (moves, p, q) = (input.moves, unit.p, unit.q);
        let first = i * p * q;
        debug_assert!(is_live(own.live, own.lane_start + first));
        let image = match mirrored(input.mirror, unit, i, (mover, opponent), at) {
            Mirrored::Skipped => return None,
            Mirrored::Writes(image) => Some(image),
            Mirrored::Own => None,
        };
        let (undecided, open) = undecided_layouts(own.won, own.lost, first, p * q)?;
        // Only now: most visits of a late step find every layout decided.
        let place = Placement::new(mover, opponent);
        own.values.prefetch_layouts(first, p * q);
        if let Some(first) = image.and_then(|image| image.first) {
            // Written when the placement wins something, after its fold.
            prefetch_words(own.won, first, p * q);
        }
        let looked_layouts = layouts_with_opponent_masters(looked_at(input, &place), p, q);
        let listing = listing(input, first_placement + i, open & looked_layouts != 0);
        listed.list(moves, landing, &place, listing);
        Some(ListedVisit { first, place, image, undecided, open, looked_layouts, listing })
    }

    #[inline(always)]
    fn fold(&mut self, listed: &PlacementMoves<'l>, visit: ListedVisit<'i>) {
        let WinVisits { input, unit, landing, own, report, win_code, .. } = self;
        let (input, landing, win_code) = (*input, *landing, *win_code);
        let (moves, depth, p, q) = (input.moves, input.depth_plies, unit.p, unit.q);
        let slots = successor_slots(p, q);
        let ListedVisit { first, place, image, undecided, open, looked_layouts, listing } = visit;
        let (reach, no_move) =
            listed.fold_listed(moves, &place, listing, 0, |reach, word, states| reach | (word & states));
        let mut sides = ChangedSides::default();
        // Each undecided layout's wins, found first without a branch on
        // whether it has any; the winning ones are then written.
        let mut wins_of = [0u32; MAX_PLACEMENT_LAYOUTS];
        let mut winning = 0u32;
        for_each_bit(open, |j| {
            let undecided = undecided[j];
            let n = first + j;
            let looked = 0u32.wrapping_sub(looked_layouts >> j & 1);
            let mut wins = moves.cards.any_predecessor(reach[slots[j] as usize], 0x1f) & !no_move;
            if looked != 0 && no_move & undecided != 0 && input.rules.no_move == NoMoveRule::Pass {
                let word = pass_word(input, landing, &place, masters_of(q, j), 0);
                wins |= moves.cards.any_predecessor(word, 0x1f) & no_move;
            }
            wins &= looked;
            // A capture win can be due only where the group has an event now.
            if own.capture_due {
                wins |= own.values.due(n, undecided & own.capture[n] & !wins, depth, DueWhen::Equal(win_code));
            }
            wins &= undecided;
            if let Some(newly_won) = own.newly_won.as_deref_mut() {
                newly_won[n] = wins;
            }
            wins_of[j] = wins;
            winning |= ((wins != 0) as u32) << j;
            report.undecided += (undecided & !wins).count_ones() as u64 * (1 + image.is_some() as u64);
        });
        for_each_layout(winning, q, |j, a, b| {
            let (n, wins) = (first + j, wins_of[j]);
            own.won[n] |= wins;
            own.values.decide(n, wins, win_code);
            decided(report, &mut sides.own, a, wins);
            if let (Some(image), Some(mirror)) = (&image, input.mirror) {
                let (n, master) = image.number(&place, a, b);
                let wins = mirror.states(wins);
                // Streamed, the image's other words are zeros (the
                // window's `fresh` is cleared as it is loaded).
                if let Some(n) = n {
                    if let Some(newly_won) = own.newly_won.as_deref_mut() {
                        newly_won[n] = wins;
                    }
                    own.won[n] |= wins;
                }
                // Its value bytes are written from the placement's when
                // the pair is finished (`mirror_values`).
                decided(report, &mut sides.image, master, wins);
            }
        });
        sides.mark(input.own_sides, &place, image.as_ref());
    }
}

/// Once a streamed mirroring step has solved `unit`'s group (a whole
/// group) in parts: writes the image words that a unit holding the whole
/// group writes as it goes ([`Image::first`]), from the placements solved
/// for them. `decided` holds the step's decisions (a win step's new wins,
/// a loss step's new losses: `fresh`), which are added to `plane` (`won`
/// or `lost`); a loss step (`clears`) clears each image's `decided` words
/// first, as it clears them. Visits the placements the step visited: the
/// live ones (`live`, with the element of the group's first layout).
pub(super) fn mirror_decisions(
    mirror: &Mirror,
    unit: Unit,
    live: Live,
    (plane, decided): (&mut [u32], &mut [u32]),
    clears: bool,
) {
    let (p, q) = (unit.p, unit.q);
    debug_assert!(unit.is_whole_group());
    for_each_placement(unit.group, unit.start, unit.end, live, |i, mover, opponent, at| {
        let Mirrored::Writes(image) = mirrored(Some(mirror), &unit, i, (mover, opponent), at) else { return };
        let image_first = image.first.expect("a whole group's unit holds its images");
        if clears {
            decided[image_first..image_first + p * q].fill(0);
        }
        let place = Placement::new(mover, opponent);
        for j in 0..p * q {
            let states = decided[i * p * q + j];
            if states != 0 {
                let m = image.held_number(&place, (j / q, j % q));
                let states = mirror.states(states);
                decided[m] = states;
                plane[m] |= states;
            }
        }
    });
}

/// The bookkeeping of states a step decides (their planes and values are
/// the caller's): the report, and the mover master's bit in `masters`
/// (its ordinal), whose side flags [`ChangedSides::mark`] sets.
#[inline(always)]
fn decided(report: &mut UnitReport, masters: &mut u8, mover_master: usize, states: u32) {
    *masters |= 1 << mover_master;
    report.decided += states.count_ones() as u64;
    report.modified = true;
}

/// The mover masters (bit a: the a-th piece in square order) of the
/// layouts that one visit of a placement decided, and of their images:
/// their side flags are set once the visit has looked at every layout,
/// each board's rank worked out once, so that a decision needs no
/// [`Layout`].
#[derive(Default)]
struct ChangedSides {
    own: u8,
    image: u8,
}

impl ChangedSides {
    #[inline(always)]
    fn mark(&self, sides: &SideFlags, place: &Placement, image: Option<&Image>) {
        if self.own != 0 {
            sides.mark_changed_masters(place.mover, self.own);
        }
        if image.is_some() && self.image != 0 {
            sides.mark_changed_masters(mirror::board(place.mover), self.image);
        }
    }
}

/// Undecided states of the `count` layouts from `first` on, and the
/// layouts with any as a bit set (bit j: the j-th); `None` if all are
/// decided. Words past `count` may hold anything: callers read only the
/// set bits' words.
#[inline(always)]
fn undecided_layouts(won: &[u32], lost: &[u32], first: usize, count: usize) -> Option<([u32; UNDECIDED_WORDS], u32)> {
    let mut undecided = [0u32; UNDECIDED_WORDS];
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    {
        // Whole vectors of 8 layouts, the words past `count` included, but
        // not past the lanes' end (the last placement of a lane: below).
        let words = count.next_multiple_of(8);
        if let (Some(won), Some(lost)) = (won.get(first..first + words), lost.get(first..first + words)) {
            // SAFETY: the only requirement of a `target_feature` function is
            // that the CPU has the feature, and this build assumes AVX2 (the
            // `cfg` above: `.cargo/config.toml` builds for x86-64-v3, and
            // `main` checks the CPU has it).
            let open = unsafe { undecided_vectors(won, lost, &mut undecided) } & ((1 << count) - 1);
            debug_assert_eq!(open, undecided_scalar(won, lost, count, &mut [0; UNDECIDED_WORDS]));
            return (open != 0).then_some((undecided, open));
        }
    }
    let open = undecided_scalar(&won[first..], &lost[first..], count, &mut undecided);
    (open != 0).then_some((undecided, open))
}

/// Words of [`undecided_layouts`]' states: [`MAX_PLACEMENT_LAYOUTS`] in
/// whole vectors of 8.
const UNDECIDED_WORDS: usize = MAX_PLACEMENT_LAYOUTS.next_multiple_of(8);

/// [`undecided_layouts`] a layout at a time, from the placement's first.
#[inline(always)]
fn undecided_scalar(won: &[u32], lost: &[u32], count: usize, undecided: &mut [u32; UNDECIDED_WORDS]) -> u32 {
    let mut open = 0;
    for (j, (won, lost)) in won[..count].iter().zip(&lost[..count]).enumerate() {
        undecided[j] = !(won | lost) & ALL_CARD_STATES;
        open |= ((undecided[j] != 0) as u32) << j;
    }
    open
}

/// [`undecided_layouts`] 8 layouts at a time (the slices' length, a
/// multiple of 8 up to [`UNDECIDED_WORDS`]): an OR, an AND-NOT and a
/// compare per vector, the layouts with any undecided state by the sign
/// bits' mask. Every word of the slices counts.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
#[target_feature(enable = "avx2")]
#[inline]
fn undecided_vectors(won: &[u32], lost: &[u32], undecided: &mut [u32; UNDECIDED_WORDS]) -> u32 {
    use std::arch::x86_64::*;
    assert!(won.len() == lost.len() && won.len() <= UNDECIDED_WORDS && won.len().is_multiple_of(8));
    let all = _mm256_set1_epi32(ALL_CARD_STATES as i32);
    let mut vector = |k: usize| {
        // SAFETY: words 8k..8k + 8 lie within each slice (the assert and the
        // callers below) and within `undecided`; unaligned loads and stores.
        let states = unsafe {
            let won = _mm256_loadu_si256(won.as_ptr().add(8 * k).cast());
            let lost = _mm256_loadu_si256(lost.as_ptr().add(8 * k).cast());
            let states = _mm256_andnot_si256(_mm256_or_si256(won, lost), all);
            _mm256_storeu_si256(undecided.as_mut_ptr().add(8 * k).cast(), states);
            states
        };
        let none = _mm256_cmpeq_epi32(states, _mm256_setzero_si256());
        (!_mm256_movemask_ps(_mm256_castsi256_ps(none)) as u32 & 0xff) << (8 * k)
    };
    // Written out rather than a loop of 1 to 4 rounds: the count is the
    // same for a whole unit, so the branches are predicted.
    let mut open = vector(0);
    if won.len() > 8 {
        open |= vector(1);
        if won.len() > 16 {
            open |= vector(2);
            if won.len() > 24 {
                open |= vector(3);
            }
        }
    }
    open
}

/// The layouts of a placement (bit j = a * q + b) whose opponent master
/// is in `masters` (bit b): [`looked_at`] per layout.
#[inline(always)]
fn layouts_with_opponent_masters(masters: u8, p: usize, q: usize) -> u32 {
    // `masters` (cut to its q bits) once per mover master a, at bit a * q:
    // one multiply by the sum of those powers of two, which never carries.
    const REPEATS: [[u32; MAX_PIECES_PER_SIDE + 1]; MAX_PIECES_PER_SIDE + 1] = {
        let mut repeats = [[0; MAX_PIECES_PER_SIDE + 1]; MAX_PIECES_PER_SIDE + 1];
        let mut p = 1;
        while p <= MAX_PIECES_PER_SIDE {
            let mut q = 1;
            while q <= MAX_PIECES_PER_SIDE {
                let mut a = 0;
                while a < p {
                    repeats[p][q] |= 1 << (a * q);
                    a += 1;
                }
                q += 1;
            }
            p += 1;
        }
        repeats
    };
    let masters = u32::from(masters) & ((1 << q) - 1);
    let layouts = masters * REPEATS[p][q];
    debug_assert_eq!(layouts, (0..p).fold(0, |layouts, a| layouts | masters << (a * q)));
    layouts
}

/// Per choice of the opponent's master (bit b: its b-th piece): must the
/// moves of these layouts be looked at, or did their successors not change
/// since they were?
#[inline(always)]
fn looked_at(input: &StepInput, place: &Placement) -> u8 {
    input.target_sides.successors_changed_by_master(place.opponent)
}

/// Own lane segments of a unit in a loss step.
pub(super) struct LossLanes<'a> {
    pub lost: &'a mut [u32],
    pub fresh: &'a mut [u32],
    pub capture: &'a mut [u32],
    pub values: StepValues<'a>,
    pub won: &'a [u32],
    /// Does a capture event of the unit's group fall due at this depth?
    pub capture_due: bool,
    /// Element number, in the material's plane lanes (resident) or the
    /// window's plane buffers (streamed), of the unit's first layout: it
    /// numbers [`PlacementFlags`].
    pub lane_start: usize,
    /// Streamed: the window's live flags (see [`is_live`]); resident, the
    /// placements still open (`Work::open`).
    pub live: Option<&'a PlacementFlags>,
    /// Resident: a placement the step finds with every state decided
    /// (its `fresh` words and flag cleared just before) is dropped from
    /// `live`, for good: nothing sets those words again, so later steps
    /// would only find the same. (Streamed, `live` says which words a
    /// window holds, and stays.)
    pub drop_decided: bool,
    /// Does a mirroring step write its images' `lost`? Streamed, finishing
    /// and the sparse listing read it. Resident, nothing does: no step
    /// visits an image, and finishing writes the images' value bytes from
    /// the solved placements' (`mirror_values`), so the words would cost
    /// a cache miss elsewhere in the group for nothing.
    pub images_lost: bool,
}

/// Even step: states all of whose moves lead to wins (in fewer than `depth`
/// plies, captures included) lose in `depth`. `landing` holds the `won`
/// segments of the material moved into.
pub(super) fn loss_step<'i, 'l>(
    input: &StepInput<'i>,
    unit: Unit,
    landing: &Landing<'l, u32>,
    own: LossLanes,
) -> UnitReport {
    let unit_elements = own.lane_start..own.lane_start + (unit.end - unit.start) as usize * unit.p * unit.q;
    let own_flags = input.own_fresh.map(|flags| flags.writer(unit_elements));
    let live = own.live.map(|flags| (flags, own.lane_start));
    // A part of a group leaves its images' words to its caller: only a
    // streamed step's (`mirror_decisions`; a resident one keeps their
    // fresh flags too, which needs the whole group).
    debug_assert!(input.mirror.is_none() || unit.is_whole_group() || (own.images_lost && input.own_fresh.is_none()));
    let loss_code = own.values.encode(Value::Loss(input.depth_plies));
    let first_placement = first_placement(&unit);
    let report = UnitReport::default();
    let mut visits = LossVisits { input, unit: &unit, landing, own, report, own_flags, loss_code, first_placement };
    for_each_placement_listed_ahead(&unit, live, &mut visits);
    visits.report
}

/// A loss step's unit, visited a placement at a time ([`VisitHalves`]).
struct LossVisits<'s, 'i, 'l> {
    input: &'s StepInput<'i>,
    unit: &'s Unit<'s>,
    landing: &'s Landing<'l, u32>,
    own: LossLanes<'s>,
    report: UnitReport,
    /// The unit's own fresh flags, if kept, written in placement order.
    own_flags: Option<FlagWriter<'s>>,
    loss_code: u16,
    first_placement: usize,
}

impl<'i, 'l> VisitHalves<'l, 'i> for LossVisits<'_, 'i, 'l> {
    #[inline(always)]
    fn list(
        &mut self,
        listed: &mut PlacementMoves<'l>,
        i: usize,
        (mover, opponent): (u32, u32),
        at: &Odometer,
    ) -> Option<ListedVisit<'i>> {
        let LossVisits { input, unit, landing, own, report, own_flags, first_placement, .. } = self;
        let (input, unit, landing, first_placement) = (*input, *unit, *landing, *first_placement);
        let (moves, p, q) = (input.moves, unit.p, unit.q);
        let first = i * p * q;
        // Only live placements: the words of the others are not their own
        // (and not logged: they decide nothing).
        debug_assert!(is_live(own.live, own.lane_start + first));
        // The placement's flag, found as the mirror's win steps find their
        // landing blocks': by its first word's lane element.
        let flag = own.lane_start + first;
        let image = match mirrored(input.mirror, unit, i, (mover, opponent), at) {
            // Its words and fresh flag are the placement's solved for it.
            Mirrored::Skipped => return None,
            Mirrored::Writes(image) => Some(image),
            Mirrored::Own => None,
        };
        // Its fresh flag, if kept, says whether there is anything to
        // clear: reading the words was a cache miss at most visits (the
        // flag is from the last loss step: the unit's writer stores it
        // only once past its word).
        let fresh = &mut own.fresh[first..first + p * q];
        let may_hold_fresh = input.own_fresh.is_none_or(|flags| flags.get(flag));
        debug_assert!(may_hold_fresh || fresh.iter().all(|&word| word == 0), "a clear flag means no fresh word");
        if may_hold_fresh && fresh.iter().any(|&word| word != 0) {
            fresh.fill(0);
            report.modified = true;
        }
        if let Some(image_first) = image.and_then(|image| image.first) {
            // Its fresh flag (which the placement solved for it keeps, with
            // `PlacementFlags::put_unshared`: the unit's writer leaves it
            // alone) says whether there is anything to clear: the image
            // lies elsewhere in the group, a cache miss to read.
            let image_flag = own.lane_start + image_first;
            if input.own_fresh.is_none_or(|flags| flags.get(image_flag)) {
                own.fresh[image_first..image_first + p * q].fill(0);
                if let Some(flags) = input.own_fresh {
                    flags.put_unshared(image_flag, false);
                }
            }
        }
        if let Some(flags) = own_flags.as_mut() {
            flags.clear(flag);
        }
        let Some((undecided, open)) = undecided_layouts(own.won, own.lost, first, p * q) else {
            if let Some(live) = own.live.filter(|_| own.drop_decided) {
                live.put(flag, false);
            }
            return None;
        };
        // Only now: most visits of a late step find every layout decided.
        let place = Placement::new(mover, opponent);
        if let Some(image_first) = image.and_then(|image| image.first).filter(|_| own.images_lost) {
            // Written when the placement decides something, after its fold:
            // ask for them now (the image lies elsewhere in the group).
            prefetch_words(own.lost, image_first, p * q);
        }
        own.values.prefetch_layouts(first, p * q);
        // Every open layout is looked at, whether its successors changed
        // or not (see `fold`).
        let listing = listing(input, first_placement + i, true);
        listed.list(moves, landing, &place, listing);
        Some(ListedVisit { first, place, image, undecided, open, looked_layouts: open, listing })
    }

    #[inline(always)]
    fn fold(&mut self, listed: &PlacementMoves<'l>, visit: ListedVisit<'i>) {
        let LossVisits { input, unit, landing, own, report, own_flags, loss_code, .. } = self;
        let (input, landing, loss_code) = (*input, *landing, *loss_code);
        let (moves, depth, p, q) = (input.moves, input.depth_plies, unit.p, unit.q);
        let slots = successor_slots(p, q);
        let ListedVisit { first, place, image, undecided, open, listing, .. } = visit;
        let flag = own.lane_start + first;
        let (all_won, no_move) =
            listed.fold_listed(moves, &place, listing, ALL_CARD_STATES, |all_won, word, states| {
                all_won & (word | !states)
            });
        let mut sides = ChangedSides::default();
        // Each undecided layout's losses, found first without a branch on
        // whether the layout has any (about a quarter do, in no order a
        // branch could predict); the decided ones are then written.
        let mut losses_of = [0u32; MAX_PLACEMENT_LAYOUTS];
        let mut losing = 0u32;
        for_each_bit(open, |j| {
            let undecided = undecided[j];
            let n = first + j;
            if own.capture_due {
                // A capture into a loss due now no longer holds a loss
                // back: losing in `depth` is as long. (Each such capture is
                // due at its own depth, when its group is visited, so
                // `<=` and the schedule's `==` clear the same bits.)
                let expired = own.values.due(n, undecided & own.capture[n], depth, DueWhen::AtMost(loss_code));
                if expired != 0 {
                    own.capture[n] &= !expired;
                    report.modified = true;
                }
            }
            // Every layout is folded, also where no successor changed since
            // the last loss step: a loss held back then by a capture is
            // found again, and lost once the capture has expired. (A
            // `held` plane kept those losses for the layouts with no
            // changed successor: at 6 men's 3v3, under 0.2% of the open
            // layouts to depth 20, 1.1% at depth 38. Reading and writing
            // it were 11-16% of the work-file traffic of 8-men 4v4's loss
            // steps at depths 4-14; docs/BENCHMARKS.md, session 88.)
            let mut losses = moves.cards.all_held(all_won[slots[j] as usize]) & !no_move;
            if no_move & undecided != 0 && input.rules.no_move == NoMoveRule::Pass {
                let word = pass_word(input, landing, &place, masters_of(q, j), ALL_CARD_STATES);
                losses |= moves.cards.all_held(word) & no_move;
            }
            // Captures into later losses (or draws, or wins) hold the loss
            // back.
            let losses = losses & undecided & !own.capture[n];
            losses_of[j] = losses;
            losing |= ((losses != 0) as u32) << j;
            report.undecided += (undecided & !losses).count_ones() as u64 * (1 + image.is_some() as u64);
        });
        for_each_layout(losing, q, |j, a, b| {
            let (n, losses) = (first + j, losses_of[j]);
            own.lost[n] |= losses;
            own.fresh[n] = losses;
            own.values.decide(n, losses, loss_code);
            decided(report, &mut sides.own, a, losses);
            // The image's `capture` words are left as they
            // were: only the placement's own step reads them, and the
            // image is never solved.
            if let (Some(image), Some(mirror)) = (&image, input.mirror) {
                let (n, master) = image.number(&place, a, b);
                let losses = mirror.states(losses);
                if let Some(n) = n {
                    if own.images_lost {
                        own.lost[n] |= losses;
                    }
                    own.fresh[n] = losses;
                }
                // Its value bytes: as a win step's image's.
                decided(report, &mut sides.image, master, losses);
            }
        });
        if sides.own != 0
            && let Some(flags) = own_flags.as_mut()
        {
            flags.set(flag);
        }
        if sides.image != 0
            && let (Some(image_first), Some(flags)) = (image.and_then(|image| image.first), input.own_fresh)
        {
            flags.put_unshared(own.lane_start + image_first, true);
        }
        sides.mark(input.own_sides, &place, image.as_ref());
    }
}

/// Every value (of `width`) from the planes alone, for a streamed material
/// whose values were never written (its steps' decisions come from the
/// decision log, applied after this): holes are [`NO_VALUE`], states won or
/// lost by then were decided at initialisation (wins in one, no-move
/// losses), the others are draws for now. Writes every byte of each
/// layout: finishing loads the value segments as the window last held them.
pub(super) fn settle(won: &[u32], lost: &[u32], width: ValueWidth, values: &mut [u8]) {
    let (win1, loss0) = (width.encode(Value::Win(1)), width.encode(Value::Loss(0)));
    for (n, values) in values.chunks_exact_mut(CARD_STATES * width.bytes()).enumerate() {
        if won[n] == ALL_CARD_STATES && lost[n] == ALL_CARD_STATES {
            values.fill(NO_VALUE);
            continue;
        }
        match width {
            ValueWidth::Byte => layout_bytes::set_all(
                values.try_into().expect("a layout's bytes"),
                DRAW,
                [(won[n], win1 as u8), (lost[n], loss0 as u8)],
            ),
            ValueWidth::Word => {
                set_codes(width, values, ALL_CARD_STATES, width.encode(Value::Draw));
                set_codes(width, values, won[n], win1);
                set_codes(width, values, lost[n], loss0);
            }
        }
    }
}

/// Undecided states are draws; holes keep [`NO_VALUE`].
pub(super) fn finish(won: &[u32], lost: &[u32], width: ValueWidth, values: &mut [u8]) {
    for (n, values) in values.chunks_exact_mut(CARD_STATES * width.bytes()).enumerate() {
        if won[n] == ALL_CARD_STATES && lost[n] == ALL_CARD_STATES {
            values.fill(NO_VALUE);
            continue;
        }
        let undecided = !(won[n] | lost[n]) & ALL_CARD_STATES;
        set_codes(width, values, undecided, width.encode(Value::Draw));
    }
}

/// The layout after moving `from` -> `to` (a pass if equal), in the new
/// mover's view. Used by tests to cross-check `Landing::find`.
#[cfg(test)]
pub(super) fn successor(layout: &Layout, from: u8, to: u8) -> Layout {
    let moved = layout.mover ^ (1 << from) ^ (1 << to);
    let master = if from == layout.mover_master { to } else { layout.mover_master };
    Layout {
        mover: rotate(layout.opponent & !(1 << to)),
        opponent: rotate(moved),
        mover_master: rotate_square(layout.opponent_master),
        opponent_master: rotate_square(master),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Material;
    use crate::rules::CardSet;

    /// The tests' random numbers (xorshift32).
    fn xorshift(seed: &mut u32) -> u32 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 17;
        *seed ^= *seed << 5;
        *seed
    }

    /// `set_values` writes exactly the bytes of the given states, a state
    /// at a time by definition, and nothing around the layout.
    #[test]
    fn set_values_writes_the_states_bytes_only() {
        let mut seed = 0x2545_f491_u32;
        let mut next = || xorshift(&mut seed);
        for round in 0..2000 {
            let states = match round {
                0 => 0,
                1 => ALL_CARD_STATES,
                _ => next() & ALL_CARD_STATES,
            };
            let byte = next() as u8;
            let before: Vec<u8> = (0..CARD_STATES + 4).map(|_| next() as u8).collect();
            let mut got = before.clone();
            set_values(&mut got[2..2 + CARD_STATES], states, byte);
            let mut expected = before.clone();
            for k in 0..CARD_STATES {
                if states >> k & 1 != 0 {
                    expected[2 + k] = byte;
                }
            }
            assert_eq!(got, expected, "states {states:#x}, byte {byte}");
        }
    }

    /// How a move ends.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum MoveKind {
        Win,
        Capture,
        Quiet,
    }

    /// Calls `visit(from, to, kind)` for every legal piece move of the
    /// layout, one (from, to) at a time: the plain way the kernels'
    /// listings are checked against.
    fn for_each_move(moves: &MoveTable, layout: &Layout, mut visit: impl FnMut(u8, u8, MoveKind)) {
        let mut pieces = layout.mover;
        while pieces != 0 {
            let from = pieces.trailing_zeros() as u8;
            pieces &= pieces - 1;
            let mut open = moves.reach[from as usize] & !layout.mover;
            while open != 0 {
                let to = open.trailing_zeros() as u8;
                open &= open - 1;
                let kind = if to == layout.opponent_master || (from == layout.mover_master && to == MOVER_TARGET) {
                    MoveKind::Win
                } else if layout.opponent & (1 << to) != 0 {
                    MoveKind::Capture
                } else {
                    MoveKind::Quiet
                };
                visit(from, to, kind);
            }
        }
    }

    #[test]
    fn event_depths_are_a_set_of_plies() {
        let mut events = EventDepths::default();
        assert_eq!(events.deepest(), 0);
        for plies in [3, 64, 200, 255] {
            events.insert(plies);
        }
        assert!([3, 64, 200, 255].iter().all(|&p| events.contains(p)));
        assert!(![0, 2, 63, 65, 254, 256, 300].iter().any(|&p| events.contains(p)));
        assert_eq!(events.deepest(), 255);
        let mut other = EventDepths::default();
        other.insert(7);
        assert!(events.union(other).contains(7) && events.union(other).contains(200));
    }

    /// A layout's capture events are the depths of its capture states'
    /// values (draws none), and the first is the smallest, as the value
    /// bytes define them.
    #[test]
    fn capture_events_are_the_capture_states_depths() {
        let mut seed = 0x2468_ace1_u32;
        let mut next = || xorshift(&mut seed);
        for round in 0..3000 {
            // Every byte a value can have: losses 1..=127, a draw, wins;
            // every other round a few of them only, so that they repeat
            // among the states with and without a capture.
            let alphabet: [u8; 3] = std::array::from_fn(|_| (next() % 255) as u8 + 1);
            let values: [u8; CARD_STATES] = std::array::from_fn(|_| match round % 2 {
                0 => (next() % 255) as u8 + 1,
                _ => alphabet[next() as usize % 3],
            });
            let capture = if round == 0 { 0 } else { next() & ALL_CARD_STATES };
            let (mut expected, mut first) = (EventDepths::default(), NO_EVENT);
            for k in (0..CARD_STATES).filter(|&k| capture >> k & 1 != 0) {
                if let Some(plies) = Value::from_byte(values[k]).and_then(Value::plies) {
                    expected.insert(plies);
                    first = first.min(plies as u8);
                }
            }
            assert_eq!(capture_events(&values, capture), (expected, first), "values {values:?}, capture {capture:#x}");
        }
    }

    /// Resident capture values are read only at a layout's next event
    /// depth, and each read finds the next one among the states still
    /// waiting; in value words too, where events past a byte's wait at
    /// [`DEEP_EVENT`].
    #[test]
    fn resident_capture_values_are_read_at_their_next_event() {
        for width in [ValueWidth::Byte, ValueWidth::Word] {
            // Layout 1 waits on a capture win in 5 (state 0), a capture
            // loss in 4 (state 3), a draw (state 7); layout 0 has nothing
            // to wait for.
            let layout_bytes = CARD_STATES * width.bytes();
            let mut values = vec![NO_VALUE; 2 * layout_bytes];
            let codes = [(0, Value::Win(5)), (3, Value::Loss(4)), (7, Value::Draw)];
            for (k, value) in codes {
                width.set_code_at(&mut values, CARD_STATES + k, width.encode(value));
            }
            let mut next_event = vec![NO_EVENT, 4];
            let mut step = StepValues::Written { values: &mut values, next_event: &mut next_event, width };
            let waiting = 1 | 1 << 3 | 1 << 7;
            let win_due = |depth: u16| DueWhen::Equal(width.encode(Value::Win(depth)));
            let loss_due = |depth: u16| DueWhen::AtMost(width.encode(Value::Loss(depth)));
            let next = |step: &StepValues| match step {
                StepValues::Written { next_event, .. } => next_event[1],
                StepValues::Logged(_) => unreachable!(),
            };
            assert_eq!(step.due(0, waiting, 3, win_due(3)), 0);
            assert_eq!(step.due(1, waiting, 3, win_due(3)), 0, "nothing before depth 4");
            assert_eq!(next(&step), 4);
            assert_eq!(step.due(1, waiting, 4, loss_due(4)), 1 << 3, "the capture loss expires at 4");
            assert_eq!(next(&step), 5);
            assert_eq!(step.due(1, waiting & !(1 << 3), 5, win_due(5)), 1, "the capture win falls due at 5");
            assert_eq!(next(&step), NO_EVENT, "a draw never falls due");
            assert_eq!(step.due(1, 1 << 7, 7, win_due(7)), 0);
            // The values are not read before the layout's next event.
            let mut next_event = vec![NO_EVENT, 6];
            let mut step = StepValues::Written { values: &mut values, next_event: &mut next_event, width };
            assert_eq!(step.due(1, waiting, 4, loss_due(4)), 0);
        }
        // A capture win in 301 plies waits at 254, read at every depth
        // from there until it falls due.
        let width = ValueWidth::Word;
        let mut values = vec![NO_VALUE; 2 * CARD_STATES];
        width.set_code_at(&mut values, 2, width.encode(Value::Win(301)));
        let (events, first) = capture_events_of_words(&values, 1 << 2);
        assert_eq!((first, events.deepest()), (DEEP_EVENT, 301));
        assert!(events.contains(256) && events.contains(301) && !events.contains(302) && !events.contains(255));
        let mut next_event = vec![first];
        let mut step = StepValues::Written { values: &mut values, next_event: &mut next_event, width };
        let win_due = |depth: u16| DueWhen::Equal(width.encode(Value::Win(depth)));
        assert_eq!(step.due(0, 1 << 2, 253, win_due(253)), 0);
        assert_eq!(step.due(0, 1 << 2, 299, win_due(299)), 0);
        assert_eq!(step.due(0, 1 << 2, 301, win_due(301)), 1 << 2);
    }

    #[test]
    fn every_block_length_visits_every_word_in_order() {
        for len in 1..=MAX_PLACEMENT_LAYOUTS {
            let block: Vec<u32> = (0..len as u32).map(|w| w * 3 + 1).collect();
            let mut seen = Vec::new();
            let mut visit = |slot, word, states| seen.push((slot, word, states));
            with_block_words!(len, N => visit_block::<N>(&block, 7, &mut visit), visit_words(&block, 7, &mut visit));
            let expected: Vec<_> = block.iter().enumerate().map(|(slot, &word)| (slot, word, 7)).collect();
            assert_eq!(seen, expected, "block of {len}");
        }
    }

    /// With live flags, the placements visited are the live ones of the
    /// unit, each with its own boards, whether the odometer steps or
    /// seeks to them; without, every placement.
    #[test]
    fn a_step_visits_the_live_placements_with_their_boards() {
        let index = MaterialIndex::new(Material::new(3, 4));
        let block_words = 12;
        let groups: Vec<_> = index.groups().iter().step_by(29).filter(|g| g.layouts >= 12 * 40).collect();
        assert!(groups.len() >= 5);
        for group in groups {
            let placements = group.layouts / block_words as u64;
            let (start, end) = (placements / 5, placements - 3);
            let lane_start = 4096;
            let mut flags =
                PlacementFlags::all_clear(lane_start + placements as usize * block_words + 4096, block_words);
            let is_live = |i: u64| i.is_multiple_of(13) || (start + 5..start + 30).contains(&i) || i == end - 1;
            let mut marker = flags.marker(lane_start);
            for i in (0..placements).filter(|&i| is_live(i)) {
                let _ = marker.mark(i as usize * block_words);
            }
            let unit_start = lane_start + start as usize * block_words;
            let mut visited = Vec::new();
            for_each_placement(group, start, end, Some((&flags, unit_start)), |i, m, o, _| visited.push((i, m, o)));
            let expected: Vec<_> = (start..end)
                .filter(|&i| is_live(i))
                .map(|i| ((i - start) as usize, group.placement(i).0, group.placement(i).1))
                .collect();
            assert_eq!(visited, expected);
            let mut all = 0;
            for_each_placement(group, start, end, None, |i, m, o, at| {
                assert_eq!((m, o), group.placement(start + i as u64));
                let (image_mover, image_opponent) = group.placement(at.image_number());
                assert_eq!((image_mover, image_opponent), (mirror::board(m), mirror::board(o)));
                all += 1;
            });
            assert_eq!(all, end - start);
        }
    }

    /// A pass reads its successor's word only where the block's flag is
    /// set (a slice buffer's other blocks hold stale words), else the
    /// step's neutral word; without flags, always.
    #[test]
    fn a_pass_reads_only_flagged_landing_blocks() {
        let block_words = 6;
        let lane: Vec<u32> = (0..4096).map(|e| e as u32 | 1 << 20).collect();
        let mut flags = PlacementFlags::all_clear(lane.len(), block_words);
        let mut marker = flags.marker(1024);
        let _ = marker.mark(13);
        // The segment of a group starting at element 1024.
        let segment = &lane[1024..2048];
        for n in 0..60 {
            let flagged = (12..18).contains(&n);
            let expected = if flagged { segment[n] } else { 0xBEEF };
            assert_eq!(landing_word((Some(&flags), &lane), segment, n, 0xBEEF), expected, "layout {n}");
            assert_eq!(landing_word((None, &lane), segment, n, 0xBEEF), segment[n]);
        }
    }

    #[test]
    fn between_is_the_squares_strictly_inside() {
        assert_eq!(between(3, 7), 0b111 << 4);
        assert_eq!(between(7, 3), 0b111 << 4);
        assert_eq!(between(5, 6), 0);
        assert_eq!(between(0, 24), ((1 << 24) - 1) & !1);
    }

    /// `Landing::find` numbers every quiet move's and capture's successor
    /// as ranking the turned layout does.
    #[test]
    fn landing_numbers_agree_with_ranking_the_successor() {
        let rules = Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Pass };
        let moves = MoveTable::new(&rules);
        let index = MaterialIndex::new(Material::new(2, 3));
        let quiet = MaterialIndex::new(Material::new(3, 2));
        let captured = MaterialIndex::new(Material::new(2, 2));
        let mut checked = 0;
        for group in index.groups().iter().step_by(7) {
            for capture in [false, true] {
                let target = if capture { &captured } else { &quiet };
                let landing: Landing<u32> = Landing::new(group, target, capture, 0x1f, |_| &[][..]);
                for (_, layout) in index.layouts_of(group) {
                    if masters_end_game(layout.mover_master, layout.opponent_master) {
                        continue;
                    }
                    for_each_move(&moves, &layout, |from, to, kind| {
                        let wanted = if capture { MoveKind::Capture } else { MoveKind::Quiet };
                        if kind == wanted {
                            let captured_bit = if capture { 1 << to } else { 0 };
                            let (number, _) = landing.find(&layout, from, to, captured_bit);
                            let next = successor(&layout, from, to);
                            let group = target.group_of(next.mover, next.opponent);
                            assert_eq!(number as u64 + group.first_layout, target.rank(&next));
                            checked += 1;
                        }
                    });
                }
            }
        }
        assert!(checked > 10_000, "checked {checked}");
    }
}

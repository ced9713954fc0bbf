//! Retrograde solver: fills value tables for every material up to a size.
//!
//! Owns the passes and their working bit planes; uses the rules for moves and
//! the index for numbering, and knows nothing of files.
//!
//! Materials are solved smallest first; a material (p, q) and its mirror
//! (q, p) are solved together, because every non-capturing move of one lands
//! in the other (the board is turned after each move). Captures land in
//! smaller materials, which are final by then.
//!
//! Each layout has four 30-bit words (one bit per card state): `won`, `lost`,
//! `fresh` (lost in the last loss step) and `capture_win` (a capture wins, at
//! the depth in the value byte). An undecided state's value byte holds the
//! best value reachable by captures alone (0 if there is none).
//!
//! The solver runs steps by depth d = 1, 2, 3, ... Odd steps decide wins in
//! d plies: an undecided state wins if a successor was lost in d - 1 (fresh).
//! Even steps decide losses in d: every successor is won (won holds only wins
//! in fewer than d plies) and captures cannot last longer. Each step reads
//! only planes that it does not write, so it is deterministic and lock-free
//! under any number of threads: workers write disjoint ranges of layouts.

use crate::index::{Group, Layout, Material, MaterialIndex, side_key, side_keys};
use crate::rules::{
    ALL_CARD_STATES, CARD_STATES, CARDS_PER_GAME, CardState, CardTables, MAX_PIECES_PER_SIDE, MOVER_TARGET, NoMoveRule,
    Rules, SQUARES, masters_end_game, rotate, rotate_square,
};
use crate::table::{SolvedMaterial, Table};
use crate::value::{self, DRAW, MAX_LOSS_PLIES, NO_VALUE, Value};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use thiserror::Error;

/// Most distinct (dx, dy) offsets five cards can have: 5 cards * 4.
const MAX_OFFSETS: usize = 20;
/// Placements per unit of parallel work: big enough to amortise scheduling,
/// small enough to balance two to many cores.
const UNIT_PLACEMENTS: u64 = 512;

#[derive(Debug, Error)]
pub enum SolveError {
    #[error("table size must be 1..={MAX_PIECES_PER_SIDE} pieces per side, got {0}")]
    Size(usize),
    #[error("material {0} needs a loss deeper than {MAX_LOSS_PLIES} plies, which the value byte cannot hold")]
    TooDeep(Material),
}

/// What the solver reports as it goes.
#[derive(Clone, Copy, Debug)]
pub enum Progress {
    MaterialStarted { materials: [Material; 2], layouts: u64 },
    Step { depth_plies: u16, decided: u64 },
    MaterialDone { materials: [Material; 2] },
}

/// Move geometry of one card set, precomputed for the hot loops.
pub struct MoveTable {
    /// For each square, one entry per offset that stays on the board.
    targets: [[Target; MAX_OFFSETS]; SQUARES],
    target_counts: [u8; SQUARES],
    cards: CardTables,
    /// `after[k][c]`: card state after playing slot c from state k.
    after: [[u8; CARDS_PER_GAME]; CARD_STATES],
}

/// A destination square and the cards that reach it.
#[derive(Clone, Copy, Default)]
struct Target {
    to: u8,
    /// Bit set of card slots with this offset.
    cards: u8,
    /// Successor-state bits of a move with one of those cards: their groups.
    successor_states: u32,
}

/// How a move ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum MoveKind {
    Win,
    Capture,
    Quiet,
}

impl MoveTable {
    pub fn new(rules: &Rules) -> MoveTable {
        let mut offsets: Vec<((i8, i8), u8)> = Vec::new();
        for (slot, card) in rules.cards.cards().iter().enumerate() {
            for &offset in card.offsets {
                match offsets.iter_mut().find(|(o, _)| *o == offset) {
                    Some((_, cards)) => *cards |= 1 << slot,
                    None => offsets.push((offset, 1 << slot)),
                }
            }
        }
        assert!(offsets.len() <= MAX_OFFSETS);
        let mut targets = [[Target::default(); MAX_OFFSETS]; SQUARES];
        let mut target_counts = [0u8; SQUARES];
        for from in 0..SQUARES as u8 {
            for &((dx, dy), cards) in &offsets {
                if let Some(to) = crate::rules::step(from, dx, dy) {
                    let n = &mut target_counts[from as usize];
                    targets[from as usize][*n as usize] = Target { to, cards, successor_states: group_mask(cards) };
                    *n += 1;
                }
            }
        }
        let mut after = [[u8::MAX; CARDS_PER_GAME]; CARD_STATES];
        for k in CardState::all() {
            for slot in k.mover_cards() {
                after[k.index()][slot] = k.after_playing(slot).index() as u8;
            }
        }
        MoveTable { targets, target_counts, cards: CardTables::new(), after }
    }

    /// Calls `visit(from, to, cards, kind)` for every legal piece move of the
    /// layout, grouped by (from, to) with the bit set of card slots that
    /// allow it. Returns the bit set of card slots with at least one move.
    #[inline(always)]
    fn for_each_move(&self, layout: &Layout, mut visit: impl FnMut(u8, u8, &Target, MoveKind)) -> u8 {
        let mut cards_with_moves = 0u8;
        let mut pieces = layout.mover;
        while pieces != 0 {
            let from = pieces.trailing_zeros() as u8;
            pieces &= pieces - 1;
            let n = self.target_counts[from as usize] as usize;
            for target in &self.targets[from as usize][..n] {
                let (to, cards) = (target.to, target.cards);
                let to_bit = 1u32 << to;
                if layout.mover & to_bit != 0 {
                    continue;
                }
                cards_with_moves |= cards;
                let kind = if to == layout.opponent_master || (from == layout.mover_master && to == MOVER_TARGET) {
                    MoveKind::Win
                } else if layout.opponent & to_bit != 0 {
                    MoveKind::Capture
                } else {
                    MoveKind::Quiet
                };
                visit(from, to, target, kind);
            }
        }
        cards_with_moves
    }

    /// Card states holding at least one of the card slots in `cards`.
    #[inline]
    fn holding_any(&self, cards: u8) -> u32 {
        let mut out = 0;
        for c in 0..CARDS_PER_GAME {
            if cards & (1 << c) != 0 {
                out |= self.cards.holds[c];
            }
        }
        out
    }
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

/// The layout after moving `from` -> `to` (a pass if equal), in the new
/// mover's view.
#[inline(always)]
fn successor(layout: &Layout, from: u8, to: u8) -> Layout {
    let moved = layout.mover ^ (1 << from) ^ (1 << to);
    let master = if from == layout.mover_master { to } else { layout.mover_master };
    Layout {
        mover: rotate(layout.opponent & !(1 << to)),
        opponent: rotate(moved),
        mover_master: rotate_square(layout.opponent_master),
        opponent_master: rotate_square(master),
    }
}

/// Working state of one material while it is solved.
struct Work {
    index: MaterialIndex,
    won: Vec<u32>,
    lost: Vec<u32>,
    fresh: Vec<u32>,
    capture_win: Vec<u32>,
    /// States all of whose moves lead to wins, held back from losing by a
    /// capture into a longer win: they lose once the depth reaches it.
    held: Vec<u32>,
    values: Vec<u8>,
    sides: SideFlags,
    /// Units of parallel work: (group number, first placement, end placement).
    units: Vec<(usize, u64, u64)>,
}

impl Work {
    fn new(material: Material) -> Work {
        let index = MaterialIndex::new(material);
        let layouts = index.layouts() as usize;
        let per_placement = (material.mover as u64) * (material.opponent as u64);
        let mut units = Vec::new();
        for (g, group) in index.groups().iter().enumerate() {
            let placements = group.layouts / per_placement;
            let mut start = 0;
            while start < placements {
                let end = (start + UNIT_PLACEMENTS).min(placements);
                units.push((g, start, end));
                start = end;
            }
        }
        Work {
            index,
            won: vec![0; layouts],
            lost: vec![0; layouts],
            fresh: vec![0; layouts],
            capture_win: vec![0; layouts],
            held: vec![0; layouts],
            sides: SideFlags::new(material.mover as usize),
            values: vec![NO_VALUE; layouts * CARD_STATES],
            units,
        }
    }

    /// Layout range of each unit, in order.
    fn unit_ranges(&self) -> Vec<(usize, usize)> {
        let per_placement = (self.index.material.mover as u64) * (self.index.material.opponent as u64);
        self.units
            .iter()
            .map(|&(g, start, end)| {
                let first = self.index.groups()[g].first_layout;
                ((first + start * per_placement) as usize, (first + end * per_placement) as usize)
            })
            .collect()
    }
}

/// Per mover side (board and master, see [`side_key`]): did a layout with
/// that mover side change in the current step / the last step? Every
/// successor of a layout has the same mover side (the turned opponent side),
/// so a layout whose successors' side did not change need not be looked at
/// again. Flags are only set during a step and read in the next, so the
/// result does not depend on timing.
struct SideFlags {
    now: Vec<AtomicBool>,
    last: Vec<AtomicBool>,
}

impl SideFlags {
    fn new(mover_pieces: usize) -> SideFlags {
        let flags = |value| (0..side_keys(mover_pieces)).map(|_| AtomicBool::new(value)).collect();
        SideFlags { now: flags(false), last: flags(true) }
    }

    /// Ends a step: what changed now is what changed last for the next one.
    fn end_step(&mut self) {
        std::mem::swap(&mut self.now, &mut self.last);
        self.now.par_iter().for_each(|flag| flag.store(false, Ordering::Relaxed));
    }

    fn mark_changed(&self, layout: &Layout) {
        self.now[side_key(layout.mover, layout.mover_master)].store(true, Ordering::Relaxed);
    }

    /// Did the mover side of this layout's successors (in the material these
    /// flags belong to) change in the last step?
    fn successors_changed(&self, layout: &Layout) -> bool {
        let key = side_key(rotate(layout.opponent), rotate_square(layout.opponent_master));
        self.last[key].load(Ordering::Relaxed)
    }
}

/// What a step reads of the material that quiet moves land in.
struct Successors<'a> {
    index: &'a MaterialIndex,
    /// `fresh` for a win step, `won` for a loss step.
    plane: &'a [u32],
    sides: &'a SideFlags,
}

/// Splits `data` into consecutive pieces of `scale` * the given ranges,
/// which must tile `0..data.len() / scale` in order.
fn split_ranges<'a, T>(mut data: &'a mut [T], ranges: &[(usize, usize)], scale: usize) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut at = 0;
    for &(start, end) in ranges {
        assert_eq!(start, at, "work units must tile the material");
        let (head, tail) = data.split_at_mut((end - start) * scale);
        out.push(head);
        data = tail;
        at = end;
    }
    assert!(data.is_empty(), "work units must cover the material");
    out
}

/// Calls `visit(layout_number, layout)` for the layouts of one unit.
#[inline(always)]
fn for_each_layout(index: &MaterialIndex, group: &Group, start: u64, end: u64, mut visit: impl FnMut(usize, &Layout)) {
    let (p, q) = (index.material.mover as u64, index.material.opponent as u64);
    let mut number = 0usize;
    for placement in start..end {
        let (mover, opponent) = group.placement(placement);
        let mut mover_rest = mover;
        for _ in 0..p {
            let mover_master = mover_rest.trailing_zeros() as u8;
            mover_rest &= mover_rest - 1;
            let mut opp_rest = opponent;
            for _ in 0..q {
                let opponent_master = opp_rest.trailing_zeros() as u8;
                opp_rest &= opp_rest - 1;
                visit(number, &Layout { mover, opponent, mover_master, opponent_master });
                number += 1;
            }
        }
    }
}

/// Solves every material with 1..=`max_per_side` pieces per side.
pub fn solve(rules: &Rules, max_per_side: usize, progress: &(dyn Fn(Progress) + Sync)) -> Result<Table, SolveError> {
    if !(1..=MAX_PIECES_PER_SIDE).contains(&max_per_side) {
        return Err(SolveError::Size(max_per_side));
    }
    let moves = MoveTable::new(rules);
    let mut solved: BTreeMap<Material, SolvedMaterial> = BTreeMap::new();
    for material in Material::all_up_to(max_per_side) {
        if solved.contains_key(&material) || material.mover > material.opponent {
            continue;
        }
        let pair = [material, material.flipped()];
        let mut works: Vec<Work> = if material.mover == material.opponent {
            vec![Work::new(material)]
        } else {
            pair.iter().map(|&m| Work::new(m)).collect()
        };
        let layouts = works.iter().map(|w| w.index.layouts()).sum();
        progress(Progress::MaterialStarted { materials: pair, layouts });
        solve_pair(rules, &moves, &mut works, &solved, progress)?;
        for work in works {
            let material = work.index.material;
            solved.insert(material, SolvedMaterial { index: work.index, values: work.values });
        }
        progress(Progress::MaterialDone { materials: pair });
    }
    Ok(Table::new(*rules, max_per_side, solved.into_values().collect()))
}

fn solve_pair(
    rules: &Rules,
    moves: &MoveTable,
    works: &mut [Work],
    solved: &BTreeMap<Material, SolvedMaterial>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(), SolveError> {
    let mut pending_plies = 0u16;
    let mut decided = 0u64;
    for work in works.iter_mut() {
        let material = work.index.material;
        let captured = (material.opponent > 1)
            .then(|| &solved[&Material::new(material.opponent as usize - 1, material.mover as usize)]);
        let (count, deepest) = initialize(rules, moves, work, captured);
        decided += count;
        pending_plies = pending_plies.max(deepest);
    }
    progress(Progress::Step { depth_plies: 1, decided });
    let mut quiet_steps = 0;
    let mut depth: u16 = 1;
    loop {
        let new = if depth % 2 == 1 {
            win_step_all(rules, moves, works, depth)
        } else {
            loss_step_all(rules, moves, works, depth)
        };
        decided += new;
        for work in works.iter_mut() {
            work.sides.end_step();
        }
        progress(Progress::Step { depth_plies: depth, decided });
        quiet_steps = if new == 0 { quiet_steps + 1 } else { 0 };
        if quiet_steps >= 2 && depth >= pending_plies {
            break;
        }
        depth += 1;
        if depth > MAX_LOSS_PLIES + 1 {
            return Err(SolveError::TooDeep(works[0].index.material));
        }
    }
    for work in works.iter_mut() {
        finish(work);
    }
    Ok(())
}

/// Runs one odd (win) step on every material of the pair.
fn win_step_all(rules: &Rules, moves: &MoveTable, works: &mut [Work], depth: u16) -> u64 {
    let mut total = 0;
    for i in 0..works.len() {
        let (this, other) = pair_views(works, i);
        total += win_step(rules, moves, this, other, depth);
    }
    total
}

fn loss_step_all(rules: &Rules, moves: &MoveTable, works: &mut [Work], depth: u16) -> u64 {
    let mut total = 0;
    for i in 0..works.len() {
        let (this, other) = pair_views(works, i);
        total += loss_step(rules, moves, this, other, depth);
    }
    total
}

/// The material to update and the one its quiet moves land in (itself when
/// the pair is a single symmetric material).
fn pair_views(works: &mut [Work], i: usize) -> (&mut Work, Option<&Work>) {
    if works.len() == 1 {
        (&mut works[0], None)
    } else {
        let (a, b) = works.split_at_mut(1);
        if i == 0 { (&mut a[0], Some(&b[0])) } else { (&mut b[0], Some(&a[0])) }
    }
}

/// Decides wins in one, no-move losses, game-over holes, and records the best
/// capture value of every other state. Returns (states decided, deepest
/// capture value in plies, which the steps must reach).
fn initialize(rules: &Rules, moves: &MoveTable, work: &mut Work, captured: Option<&SolvedMaterial>) -> (u64, u16) {
    let ranges = work.unit_ranges();
    let won = split_ranges(&mut work.won, &ranges, 1);
    let lost = split_ranges(&mut work.lost, &ranges, 1);
    let fresh = split_ranges(&mut work.fresh, &ranges, 1);
    let capture_win = split_ranges(&mut work.capture_win, &ranges, 1);
    let values = split_ranges(&mut work.values, &ranges, CARD_STATES);
    let index = &work.index;
    let win1 = Value::Win(1).to_byte();
    let loss0 = Value::Loss(0).to_byte();
    let slices: Vec<_> = won.into_iter().zip(lost).zip(fresh).zip(capture_win).zip(values).collect();
    work.units
        .par_iter()
        .zip(slices)
        .map(|(&(g, start, end), ((((won, lost), fresh), capture_win), values))| {
            let group = &index.groups()[g];
            let mut decided = 0u64;
            let mut deepest = 0u16;
            for_each_layout(index, group, start, end, |n, layout| {
                let values = &mut values[n * CARD_STATES..(n + 1) * CARD_STATES];
                if masters_end_game(layout.mover_master, layout.opponent_master) {
                    won[n] = ALL_CARD_STATES;
                    lost[n] = ALL_CARD_STATES;
                    return;
                }
                let mut win_cards = 0u8;
                let cards_with_moves = moves.for_each_move(layout, |from, to, target, kind| match kind {
                    MoveKind::Win => win_cards |= target.cards,
                    MoveKind::Capture => {
                        let table = captured.expect("a capture needs a smaller material");
                        let next = successor(layout, from, to);
                        let base = table.index.rank(&next) as usize * CARD_STATES;
                        for_each_held_card_state(moves, target.cards, |k, slot| {
                            let after = moves.after[k][slot] as usize;
                            let mine = value::negate(table.values[base + after]);
                            values[k] = values[k].max(mine);
                        });
                    }
                    MoveKind::Quiet => {}
                });
                let win_now = moves.holding_any(win_cards);
                let no_move = ALL_CARD_STATES & !moves.holding_any(cards_with_moves);
                won[n] = win_now;
                let mut lost_now = 0;
                if rules.no_move == NoMoveRule::Loss {
                    lost_now = no_move;
                }
                lost[n] = lost_now;
                fresh[n] = lost_now;
                for (k, value) in values.iter_mut().enumerate() {
                    let bit = 1u32 << k;
                    if win_now & bit != 0 {
                        *value = win1;
                    } else if lost_now & bit != 0 {
                        *value = loss0;
                    } else if let Some(v) = Value::from_byte(*value) {
                        match v {
                            Value::Win(p) => {
                                capture_win[n] |= bit;
                                deepest = deepest.max(p);
                            }
                            Value::Loss(p) => deepest = deepest.max(p),
                            Value::Draw => {}
                        }
                    }
                }
                decided += (win_now | lost_now).count_ones() as u64;
            });
            (decided, deepest)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1.max(b.1)))
}

/// Calls `visit(card_state, slot)` for every state holding a slot in `cards`.
#[inline(always)]
fn for_each_held_card_state(moves: &MoveTable, cards: u8, mut visit: impl FnMut(usize, usize)) {
    for slot in 0..CARDS_PER_GAME {
        if cards & (1 << slot) == 0 {
            continue;
        }
        let mut states = moves.cards.holds[slot];
        while states != 0 {
            let k = states.trailing_zeros() as usize;
            states &= states - 1;
            visit(k, slot);
        }
    }
}

/// For one unit of `this`: the group of the turned layout in `target` after
/// a quiet move from row `r` to row `s` (`[r][r]`: any move within a row, or
/// a pass).
fn successor_groups<'a>(group: &Group, target: &'a MaterialIndex) -> [[Option<&'a Group>; 5]; 5] {
    let mut out = [[None; 5]; 5];
    let mut turned_mover = group.opponent_counts;
    turned_mover.reverse();
    for (from_row, row) in out.iter_mut().enumerate() {
        for (to_row, slot) in row.iter_mut().enumerate() {
            if group.mover_counts[from_row] == 0 {
                continue;
            }
            let mut moved = group.mover_counts;
            moved[from_row] -= 1;
            moved[to_row] += 1;
            moved.reverse();
            *slot = target.group_by_counts(&turned_mover, &moved).map(|g| &target.groups()[g]);
        }
    }
    out
}

/// Number, in `target`, of the layout after a quiet move (or a pass when
/// `from == to`).
#[inline(always)]
fn successor_number(
    target: &MaterialIndex,
    groups: &[[Option<&Group>; 5]; 5],
    layout: &Layout,
    from: u8,
    to: u8,
) -> usize {
    let group = groups[(from / 5) as usize][(to / 5) as usize].expect("a quiet move stays in the material");
    let moved = layout.mover ^ (1 << from) ^ (1 << to);
    let master = if from == layout.mover_master { to } else { layout.mover_master };
    target.rank_turned(group, moved, layout.opponent, master, layout.opponent_master) as usize
}

/// Odd step: states that can move into a loss in `depth - 1` plies win in
/// `depth`.
fn win_step(rules: &Rules, moves: &MoveTable, this: &mut Work, other: Option<&Work>, depth: u16) -> u64 {
    let ranges = this.unit_ranges();
    let win_byte = Value::Win(depth).to_byte();
    let won = split_ranges(&mut this.won, &ranges, 1);
    let values = split_ranges(&mut this.values, &ranges, CARD_STATES);
    let target = match other {
        Some(o) => Successors { index: &o.index, plane: &o.fresh, sides: &o.sides },
        None => Successors { index: &this.index, plane: &this.fresh, sides: &this.sides },
    };
    let (lost, capture_win, index, sides) = (&this.lost, &this.capture_win, &this.index, &this.sides);
    let may_skip = depth > 2;
    let slices: Vec<_> = won.into_iter().zip(values).collect();
    this.units
        .par_iter()
        .zip(&ranges)
        .zip(slices)
        .map(|((&(g, start, end), &(first, _)), (won, values))| {
            let group = &index.groups()[g];
            let groups = successor_groups(group, target.index);
            let mut new = 0u64;
            for_each_layout(index, group, start, end, |n, layout| {
                let undecided = !(won[n] | lost[first + n]) & ALL_CARD_STATES;
                if undecided == 0 {
                    return;
                }
                let pending_capture = undecided & capture_win[first + n];
                let look = !may_skip || target.sides.successors_changed(layout);
                if !look && pending_capture == 0 {
                    return;
                }
                let mut wins = 0;
                if look {
                    let mut reach = 0u32;
                    let cards_with_moves = moves.for_each_move(layout, |from, to, t, kind| {
                        if kind == MoveKind::Quiet {
                            let next = successor_number(target.index, &groups, layout, from, to);
                            reach |= target.plane[next] & t.successor_states;
                        }
                    });
                    let no_move = ALL_CARD_STATES & !moves.holding_any(cards_with_moves);
                    wins = moves.cards.any_predecessor(reach, 0x1f) & !no_move;
                    if no_move & undecided != 0 && rules.no_move == NoMoveRule::Pass {
                        let at = layout.mover_master;
                        let next = successor_number(target.index, &groups, layout, at, at);
                        wins |= moves.cards.any_predecessor(target.plane[next], 0x1f) & no_move;
                    }
                }
                let values = &mut values[n * CARD_STATES..(n + 1) * CARD_STATES];
                let mut by_capture = pending_capture & !wins;
                while by_capture != 0 {
                    let k = by_capture.trailing_zeros() as usize;
                    by_capture &= by_capture - 1;
                    if values[k] == win_byte {
                        wins |= 1 << k;
                    }
                }
                wins &= undecided;
                if wins != 0 {
                    won[n] |= wins;
                    new += wins.count_ones() as u64;
                    set_values(values, wins, win_byte);
                    sides.mark_changed(layout);
                }
            });
            new
        })
        .sum()
}

/// Even step: states all of whose moves lead to wins (in fewer than `depth`
/// plies, captures included) lose in `depth`.
fn loss_step(rules: &Rules, moves: &MoveTable, this: &mut Work, other: Option<&Work>, depth: u16) -> u64 {
    let ranges = this.unit_ranges();
    let loss_byte = Value::Loss(depth).to_byte();
    let lost = split_ranges(&mut this.lost, &ranges, 1);
    let fresh = split_ranges(&mut this.fresh, &ranges, 1);
    let held = split_ranges(&mut this.held, &ranges, 1);
    let values = split_ranges(&mut this.values, &ranges, CARD_STATES);
    let (won, index, sides) = (&this.won[..], &this.index, &this.sides);
    let target = match other {
        Some(o) => Successors { index: &o.index, plane: &o.won, sides: &o.sides },
        None => Successors { index, plane: won, sides },
    };
    let may_skip = depth > 2;
    let slices: Vec<_> = lost.into_iter().zip(fresh).zip(held).zip(values).collect();
    this.units
        .par_iter()
        .zip(&ranges)
        .zip(slices)
        .map(|((&(g, start, end), &(first, _)), (((lost, fresh), held), values))| {
            let group = &index.groups()[g];
            let groups = successor_groups(group, target.index);
            let mut new = 0u64;
            for_each_layout(index, group, start, end, |n, layout| {
                fresh[n] = 0;
                let undecided = !(won[first + n] | lost[n]) & ALL_CARD_STATES;
                if undecided == 0 {
                    return;
                }
                let values = &mut values[n * CARD_STATES..(n + 1) * CARD_STATES];
                // Unchanged successors give the answer of two steps ago: only
                // losses held back by a capture can be due now.
                let mut losses = if may_skip && !target.sides.successors_changed(layout) {
                    held[n] & undecided
                } else {
                    let mut all_won = ALL_CARD_STATES;
                    let cards_with_moves = moves.for_each_move(layout, |from, to, t, kind| {
                        if kind == MoveKind::Quiet {
                            let next = successor_number(target.index, &groups, layout, from, to);
                            all_won &= target.plane[next] | !t.successor_states;
                        }
                    });
                    let no_move = ALL_CARD_STATES & !moves.holding_any(cards_with_moves);
                    let mut losses = moves.cards.all_held(all_won) & !no_move;
                    if no_move & undecided != 0 && rules.no_move == NoMoveRule::Pass {
                        let at = layout.mover_master;
                        let next = successor_number(target.index, &groups, layout, at, at);
                        losses |= moves.cards.all_held(target.plane[next]) & no_move;
                    }
                    losses & undecided
                };
                // Captures that lead to later wins (or draws, or wins for
                // us) hold the loss back.
                let mut check = losses;
                let mut held_back = 0;
                while check != 0 {
                    let k = check.trailing_zeros() as usize;
                    check &= check - 1;
                    if values[k] != NO_VALUE && values[k] > loss_byte {
                        held_back |= 1 << k;
                    }
                }
                losses &= !held_back;
                held[n] = held_back;
                if losses != 0 {
                    lost[n] |= losses;
                    fresh[n] = losses;
                    new += losses.count_ones() as u64;
                    set_values(values, losses, loss_byte);
                    sides.mark_changed(layout);
                }
            });
            new
        })
        .sum()
}

#[inline]
fn set_values(values: &mut [u8], states: u32, byte: u8) {
    let mut rest = states;
    while rest != 0 {
        let k = rest.trailing_zeros() as usize;
        rest &= rest - 1;
        values[k] = byte;
    }
}

/// Undecided states are draws; holes keep [`NO_VALUE`].
fn finish(work: &mut Work) {
    let (won, lost) = (&work.won, &work.lost);
    work.values.par_chunks_mut(CARD_STATES).enumerate().for_each(|(n, values)| {
        if won[n] == ALL_CARD_STATES && lost[n] == ALL_CARD_STATES {
            values.fill(NO_VALUE);
            return;
        }
        let undecided = !(won[n] | lost[n]) & ALL_CARD_STATES;
        set_values(values, undecided, DRAW);
    });
}

//! Retrograde solver: fills value tables for every material up to a size.
//!
//! Owns the passes, their schedule over index groups and their working
//! lanes; uses the rules for moves and the index for numbering, and knows
//! nothing of files (the block store behind the lanes does the I/O).
//!
//! Materials are solved smallest first; a material (p, q) and its mirror
//! (q, p) are solved together, because every non-capturing move of one lands
//! in the other (the board is turned after each move). Captures land in
//! smaller materials, which are final by then.
//!
//! Each layout has five 30-bit words (one bit per card state) and 30 value
//! bytes, kept in [`lanes`]: `won`, `lost`, `fresh` (lost in the last loss
//! step), `capture_win` (a capture wins, at the depth in the value byte) and
//! `held` (every quiet move loses but a capture holds the loss back). An
//! undecided state's value byte holds the best value reachable by captures
//! alone (0 if there is none).
//!
//! The solver runs steps by depth d = 1, 2, 3, ... Odd steps decide wins in
//! d plies: an undecided state wins if a successor was lost in d - 1 (fresh).
//! Even steps decide losses in d: every successor is won (won holds only wins
//! in fewer than d plies) and captures cannot last longer. Each step reads
//! only lanes that it does not write, so it is deterministic and lock-free
//! under any number of threads: workers write disjoint ranges of layouts.
//!
//! A step visits a material's groups slice by slice of the opponent's row
//! counts: every quiet move out of the groups with opponent counts O lands in
//! the groups of the mirror material whose mover counts are O turned, one
//! contiguous slice of its lanes (seed 002's loop nest). That is what lets
//! the block store stream the table: see [`schedule`].

mod flags;
mod kernel;
pub mod lanes;
mod schedule;

use crate::index::{Group, Material, MaterialIndex};
use crate::rules::{MAX_PIECES_PER_SIDE, Rules};
use crate::table::{SolvedMaterial, Table};
use crate::value::MAX_LOSS_PLIES;
use flags::{GroupFlags, SideFlags};
use kernel::{Landing, MoveTable, NO_EVENT, ROWS, StepInput, Unit, UnitReport};
use lanes::{LaneLayout, ResidentLanes, SegmentMap, Span, carve_mut};
use rayon::prelude::*;
use std::collections::BTreeMap;
use thiserror::Error;

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

/// What the solver keeps per group between steps.
#[derive(Clone, Copy, Debug)]
struct GroupState {
    /// Card states not decided yet.
    undecided: u64,
    /// Earliest depth at which a capture value makes a state due.
    next_event_plies: u16,
}

/// Working state of one material while it is solved.
struct Work {
    index: MaterialIndex,
    /// Layout of the five plane lanes (4 bytes per layout).
    planes: LaneLayout,
    /// Layout of the value lane (30 bytes per layout).
    values: LaneLayout,
    lanes: ResidentLanes,
    sides: SideFlags,
    changed: GroupFlags,
    groups: Vec<GroupState>,
}

impl Work {
    fn new(material: Material) -> Work {
        let index = MaterialIndex::new(material);
        let planes = LaneLayout::new(&index, 4);
        let values = LaneLayout::new(&index, crate::rules::CARD_STATES as u64);
        let lanes = ResidentLanes::new(&planes, &values);
        let groups = vec![GroupState { undecided: 0, next_event_plies: NO_EVENT }; index.groups().len()];
        Work {
            sides: SideFlags::new(material.mover as usize),
            changed: GroupFlags::new(index.groups().len()),
            index,
            planes,
            values,
            lanes,
            groups,
        }
    }

    fn plane_map(&self) -> Span<'_> {
        plane_span(&self.planes)
    }
}

/// A whole plane lane as a region.
fn plane_span(layout: &LaneLayout) -> Span<'_> {
    Span { layout, first_byte: 0, element_bytes: 4 }
}

/// A whole value lane as a region.
fn value_span(layout: &LaneLayout) -> Span<'_> {
    Span { layout, first_byte: 0, element_bytes: 1 }
}

/// A finished material: its value lane.
struct Finished {
    index: MaterialIndex,
    values_layout: LaneLayout,
    values: Vec<u8>,
}

impl Finished {
    /// The value bytes without segment padding, in layout order.
    fn into_solved(self) -> SolvedMaterial {
        let mut values = Vec::with_capacity(self.index.layouts() as usize * crate::rules::CARD_STATES);
        for g in 0..self.index.groups().len() {
            let segment = self.values_layout.segment(g);
            values.extend_from_slice(&self.values[segment.start as usize..segment.end as usize]);
        }
        SolvedMaterial { index: self.index, values }
    }
}

/// A region of memory holding segments of one lane, read-only.
struct ReadRegion<'a, T> {
    map: &'a dyn SegmentMap,
    data: &'a [T],
}

impl<'a, T> ReadRegion<'a, T> {
    #[inline]
    fn segment(&self, g: usize) -> &'a [T] {
        &self.data[self.map.elements(g)]
    }
}

/// The landing table of group `group` in `target` (captures: `capture`).
fn landing<'a, T>(
    group: &Group,
    target: &'a MaterialIndex,
    region: &ReadRegion<'a, T>,
    capture: bool,
) -> Landing<'a, T> {
    let mut groups = [[None; ROWS]; ROWS];
    for (from_row, row) in groups.iter_mut().enumerate() {
        if group.mover_counts[from_row] == 0 {
            continue;
        }
        for (to_row, slot) in row.iter_mut().enumerate() {
            if capture && group.opponent_counts[to_row] == 0 {
                continue;
            }
            let (mover, opponent) = kernel::landing_counts(group, from_row, to_row, capture);
            *slot = target.group_by_counts(&mover, &opponent).map(|g| (&target.groups()[g], region.segment(g)));
        }
    }
    Landing { index: target, groups }
}

/// Units of work over the given groups: (group number, placement range,
/// layout range within the group).
fn units_of(index: &MaterialIndex, groups: &[usize]) -> Vec<(usize, u64, u64)> {
    let per_placement = (index.material.mover as u64) * (index.material.opponent as u64);
    let mut units = Vec::new();
    for &g in groups {
        let placements = index.groups()[g].layouts / per_placement;
        let mut start = 0;
        while start < placements {
            let end = (start + UNIT_PLACEMENTS).min(placements);
            units.push((g, start, end));
            start = end;
        }
    }
    units
}

/// Element range of a unit within a region.
fn unit_elements(
    map: &dyn SegmentMap,
    index: &MaterialIndex,
    unit: (usize, u64, u64),
    per_layout: usize,
) -> std::ops::Range<usize> {
    let per_placement = (index.material.mover as u64) * (index.material.opponent as u64);
    let group = map.elements(unit.0);
    let start = group.start + (unit.1 * per_placement) as usize * per_layout;
    let end = group.start + (unit.2 * per_placement) as usize * per_layout;
    debug_assert!(end <= group.end);
    start..end
}

/// Solves every material with 1..=`max_per_side` pieces per side.
pub fn solve(rules: &Rules, max_per_side: usize, progress: &(dyn Fn(Progress) + Sync)) -> Result<Table, SolveError> {
    if !(1..=MAX_PIECES_PER_SIDE).contains(&max_per_side) {
        return Err(SolveError::Size(max_per_side));
    }
    let moves = MoveTable::new(rules);
    let mut solved: BTreeMap<Material, Finished> = BTreeMap::new();
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
            solved.insert(
                material,
                Finished { index: work.index, values_layout: work.values, values: work.lanes.values },
            );
        }
        progress(Progress::MaterialDone { materials: pair });
    }
    let materials = solved.into_values().map(Finished::into_solved).collect();
    Ok(Table::new(*rules, max_per_side, materials))
}

fn solve_pair(
    rules: &Rules,
    moves: &MoveTable,
    works: &mut [Work],
    solved: &BTreeMap<Material, Finished>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(), SolveError> {
    let mut pending_plies = 0u16;
    let mut decided = 0u64;
    for work in works.iter_mut() {
        let material = work.index.material;
        let captured = (material.opponent > 1)
            .then(|| &solved[&Material::new(material.opponent as usize - 1, material.mover as usize)]);
        let report = initialize(rules, moves, work, captured);
        decided += report.decided;
        pending_plies = pending_plies.max(report.deepest_plies);
    }
    progress(Progress::Step { depth_plies: 1, decided });
    let mut quiet_steps = 0;
    let mut depth: u16 = 1;
    loop {
        let mut new = 0;
        for i in 0..works.len() {
            new += step(rules, moves, works, i, depth);
        }
        decided += new;
        for work in works.iter_mut() {
            work.sides.end_step();
            work.changed.end_step();
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

/// Folds in captures and decides wins in one, no-move losses and holes.
fn initialize(rules: &Rules, moves: &MoveTable, work: &mut Work, captured: Option<&Finished>) -> UnitReport {
    let all: Vec<usize> = (0..work.index.groups().len()).collect();
    let units = units_of(&work.index, &all);
    let (p, q) = (work.index.material.mover as usize, work.index.material.opponent as usize);
    let index = &work.index;
    let (plane_map, value_map) = (plane_span(&work.planes), value_span(&work.values));
    if let Some(captured) = captured {
        let map = Span { layout: &captured.values_layout, first_byte: 0, element_bytes: 1 };
        let region = ReadRegion { map: &map, data: &captured.values[..] };
        let values = carve_mut(&mut work.lanes.values, units.iter().map(|&u| unit_elements(&value_map, index, u, 30)));
        units.par_iter().zip(values).for_each(|(&(g, start, end), values)| {
            let group = &index.groups()[g];
            let landing = landing(group, &captured.index, &region, true);
            kernel::fold_captures(moves, Unit { group, p, q, start, end }, &landing, 0x1f, values);
        });
    }
    let lanes = &mut work.lanes;
    let plane_ranges = || units.iter().map(|&u| unit_elements(&plane_map, index, u, 1));
    let won = carve_mut(&mut lanes.won, plane_ranges());
    let lost = carve_mut(&mut lanes.lost, plane_ranges());
    let fresh = carve_mut(&mut lanes.fresh, plane_ranges());
    let capture_win = carve_mut(&mut lanes.capture_win, plane_ranges());
    let values = carve_mut(&mut lanes.values, units.iter().map(|&u| unit_elements(&value_map, index, u, 30)));
    let slices: Vec<_> = won.into_iter().zip(lost).zip(fresh).zip(capture_win).zip(values).collect();
    let reports: Vec<UnitReport> = units
        .par_iter()
        .zip(slices)
        .map(|(&(g, start, end), ((((won, lost), fresh), capture_win), values))| {
            let group = &index.groups()[g];
            let own = kernel::InitLanes { won, lost, fresh, capture_win, values };
            kernel::initialize(rules, moves, Unit { group, p, q, start, end }, own)
        })
        .collect();
    record_reports(work, &units, &reports, false)
}

/// Stores per-group results of a pass; returns their total.
fn record_reports(work: &mut Work, units: &[(usize, u64, u64)], reports: &[UnitReport], mark: bool) -> UnitReport {
    let mut total = UnitReport { next_event_plies: NO_EVENT, ..UnitReport::default() };
    let mut i = 0;
    while i < units.len() {
        let g = units[i].0;
        let mut merged = UnitReport { next_event_plies: NO_EVENT, ..UnitReport::default() };
        while i < units.len() && units[i].0 == g {
            merged = UnitReport::merge(merged, reports[i]);
            i += 1;
        }
        work.groups[g] = GroupState { undecided: merged.undecided, next_event_plies: merged.next_event_plies };
        if mark && merged.decided > 0 {
            work.changed.now[g] = true;
        }
        total = UnitReport::merge(total, merged);
    }
    total
}

/// Groups of `this` that a step at `depth` must visit: those with undecided
/// states whose successors changed in the last step, or with a capture
/// event due.
fn groups_to_visit(this: &Work, target: &Work, depth: u16) -> Vec<usize> {
    (0..this.index.groups().len())
        .filter(|&g| {
            let state = this.groups[g];
            if state.undecided == 0 {
                return false;
            }
            if depth <= 2 || state.next_event_plies <= depth {
                return true;
            }
            let group = &this.index.groups()[g];
            schedule::landing_groups(group, &target.index).into_iter().any(|t| target.changed.last[t])
        })
        .collect()
}

/// Runs one step at `depth` on material `i` of the pair; returns the number
/// of states decided.
fn step(rules: &Rules, moves: &MoveTable, works: &mut [Work], i: usize, depth: u16) -> u64 {
    let (this, other) = pair_views(works, i);
    let visit = groups_to_visit(this, other.unwrap_or(this), depth);
    let units = units_of(&this.index, &visit);
    let (p, q) = (this.index.material.mover as usize, this.index.material.opponent as usize);
    let index = &this.index;
    let (plane_map, value_map) = (plane_span(&this.planes), value_span(&this.values));
    let plane_ranges = || units.iter().map(|&u| unit_elements(&plane_map, index, u, 1));
    let value_ranges = || units.iter().map(|&u| unit_elements(&value_map, index, u, 30));
    let lanes = &mut this.lanes;
    let own_sides = &this.sides;
    let target_index = other.map_or(index, |o| &o.index);
    let target_sides = other.map_or(own_sides, |o| &o.sides);
    let target_map = other.map(|o| o.plane_map());
    let target_map: &dyn SegmentMap = match &target_map {
        Some(m) => m,
        None => &plane_map,
    };
    let input = StepInput { rules, moves, depth_plies: depth, target_sides, own_sides, may_skip: depth > 2 };
    let reports: Vec<UnitReport> = if depth % 2 == 1 {
        let won = carve_mut(&mut lanes.won, plane_ranges());
        let values = carve_mut(&mut lanes.values, value_ranges());
        let (lost, capture_win, held) = (&lanes.lost[..], &lanes.capture_win[..], &lanes.held[..]);
        let region = ReadRegion { map: target_map, data: other.map_or(&lanes.fresh[..], |o| &o.lanes.fresh[..]) };
        units
            .par_iter()
            .zip(won.into_iter().zip(values).collect::<Vec<_>>())
            .map(|(&u, (won, values))| {
                let (g, start, end) = u;
                let group = &index.groups()[g];
                let r = unit_elements(&plane_map, index, u, 1);
                let own = kernel::WinLanes {
                    won,
                    values,
                    lost: &lost[r.clone()],
                    capture_win: &capture_win[r.clone()],
                    held: &held[r],
                };
                let landing = landing(group, target_index, &region, false);
                kernel::win_step(&input, Unit { group, p, q, start, end }, &landing, own)
            })
            .collect()
    } else {
        let lost = carve_mut(&mut lanes.lost, plane_ranges());
        let fresh = carve_mut(&mut lanes.fresh, plane_ranges());
        let held = carve_mut(&mut lanes.held, plane_ranges());
        let values = carve_mut(&mut lanes.values, value_ranges());
        let (won, capture_win) = (&lanes.won[..], &lanes.capture_win[..]);
        let region = ReadRegion { map: target_map, data: other.map_or(won, |o| &o.lanes.won[..]) };
        let slices: Vec<_> = lost.into_iter().zip(fresh).zip(held).zip(values).collect();
        units
            .par_iter()
            .zip(slices)
            .map(|(&u, (((lost, fresh), held), values))| {
                let (g, start, end) = u;
                let group = &index.groups()[g];
                let r = unit_elements(&plane_map, index, u, 1);
                let own =
                    kernel::LossLanes { lost, fresh, held, values, won: &won[r.clone()], capture_win: &capture_win[r] };
                let landing = landing(group, target_index, &region, false);
                kernel::loss_step(&input, Unit { group, p, q, start, end }, &landing, own)
            })
            .collect()
    };
    record_reports(this, &units, &reports, true).decided
}

/// The material to update and the one its quiet moves land in (None when
/// the pair is a single symmetric material: it lands in itself).
fn pair_views(works: &mut [Work], i: usize) -> (&mut Work, Option<&Work>) {
    if works.len() == 1 {
        (&mut works[0], None)
    } else {
        let (a, b) = works.split_at_mut(1);
        if i == 0 { (&mut a[0], Some(&b[0])) } else { (&mut b[0], Some(&a[0])) }
    }
}

/// Undecided states are draws; holes keep no value.
fn finish(work: &mut Work) {
    let all: Vec<usize> = (0..work.index.groups().len()).collect();
    let (plane_map, value_map) = (plane_span(&work.planes), value_span(&work.values));
    let values = carve_mut(&mut work.lanes.values, all.iter().map(|&g| value_map.elements(g)));
    let (won, lost) = (&work.lanes.won, &work.lanes.lost);
    all.par_iter().zip(values).for_each(|(&g, values)| {
        let r = plane_map.elements(g);
        kernel::finish(&won[r.clone()], &lost[r], values);
    });
}

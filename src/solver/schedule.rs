//! The schedule of a step over index groups: which groups of the mirror
//! material the quiet moves of a group land in, and in which order groups
//! are visited so that those landing groups form one contiguous slice.
//!
//! A material's groups are numbered mover counts first, so the groups that
//! share mover counts are consecutive: a *mover slice*. Quiet moves out of
//! the groups with opponent counts O (an *opponent slice*, scattered over
//! the lanes) all land in the mover slice of the mirror material whose
//! mover counts are O turned. A step therefore visits opponent slice by
//! opponent slice, with one landing slice resident at a time. Captures
//! that take a piece in row r land in the mover slice of the captured
//! material with counts (O minus one in row r) turned.
//!
//! Owns only group arithmetic; knows nothing of lanes, memory or moves.

use super::kernel::{ROWS, landing_counts};
use crate::index::{Group, MaterialIndex};
use std::collections::HashMap;
use std::ops::Range;

/// Groups of `target` that quiet moves (and passes) out of `group` land in:
/// at most one per (from row, to row), all with mover counts = the group's
/// opponent counts turned.
pub(super) fn landing_groups(group: &Group, target: &MaterialIndex) -> Vec<usize> {
    let mut out = Vec::with_capacity(ROWS * ROWS);
    for from_row in 0..ROWS {
        if group.mover_counts[from_row] == 0 {
            continue;
        }
        for to_row in 0..ROWS {
            let (mover, opponent) = landing_counts(group, from_row, to_row, false);
            if let Some(g) = target.group_by_counts(&mover, &opponent) {
                out.push(g);
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The mover slices of a material: consecutive group ranges by mover counts.
pub(super) struct MoverSlices {
    by_counts: HashMap<[u8; ROWS], Range<usize>>,
}

impl MoverSlices {
    pub fn new(index: &MaterialIndex) -> MoverSlices {
        let mut by_counts: HashMap<[u8; ROWS], Range<usize>> = HashMap::new();
        for (g, group) in index.groups().iter().enumerate() {
            let range = by_counts.entry(group.mover_counts).or_insert(g..g);
            assert_eq!(range.end, g, "groups with equal mover counts must be consecutive");
            range.end = g + 1;
        }
        MoverSlices { by_counts }
    }

    /// The groups with these mover counts (empty if there are none).
    pub fn get(&self, mover_counts: &[u8; ROWS]) -> Range<usize> {
        self.by_counts.get(mover_counts).cloned().unwrap_or(0..0)
    }

    pub fn all(&self) -> impl Iterator<Item = &Range<usize>> {
        self.by_counts.values()
    }
}

/// The opponent slices of a material, in a fixed order: (opponent counts,
/// its groups in increasing order).
pub(super) fn opponent_slices(index: &MaterialIndex) -> Vec<([u8; ROWS], Vec<usize>)> {
    let mut by_counts: HashMap<[u8; ROWS], Vec<usize>> = HashMap::new();
    for (g, group) in index.groups().iter().enumerate() {
        by_counts.entry(group.opponent_counts).or_default().push(g);
    }
    let mut out: Vec<_> = by_counts.into_iter().collect();
    out.sort();
    out
}

/// Mover counts of the landing slice of opponent slice `opponent_counts`,
/// after a capture in `captured_row` if any.
pub(super) fn landing_slice_counts(opponent_counts: &[u8; ROWS], captured_row: Option<usize>) -> [u8; ROWS] {
    let mut counts = *opponent_counts;
    if let Some(row) = captured_row {
        counts[row] -= 1;
    }
    counts.reverse();
    counts
}

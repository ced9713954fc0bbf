//! The schedule of a step over index groups: which groups of the mirror
//! material the quiet moves of a group land in, and in which order groups
//! are visited so that those landing groups form few contiguous slices.
//!
//! Owns only group arithmetic; knows nothing of lanes, memory or moves.

use super::kernel::{ROWS, landing_counts};
use crate::index::{Group, MaterialIndex};

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

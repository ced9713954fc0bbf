//! Change flags: which parts of a material changed in the current step and
//! in the last one, so a step can skip layouts and whole groups whose
//! successors did not change.
//!
//! Flags are only set during a step and read in the next, so what is
//! skipped does not depend on timing or thread count. They are a pure
//! optimisation: setting every flag (as a resumed run does) gives the same
//! table, only slower.

use crate::index::{Layout, side_key, side_keys};
use crate::rules::{rotate, rotate_square};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

/// Per mover side (board and master, see [`side_key`]). Every successor of a
/// layout has the same mover side (the turned opponent side), so a layout
/// whose successors' side did not change need not be looked at again.
pub(super) struct SideFlags {
    now: Vec<AtomicBool>,
    last: Vec<AtomicBool>,
}

impl SideFlags {
    pub fn new(mover_pieces: usize) -> SideFlags {
        let flags = |value| (0..side_keys(mover_pieces)).map(|_| AtomicBool::new(value)).collect();
        SideFlags { now: flags(false), last: flags(true) }
    }

    /// Ends a step: what changed now is what changed last for the next one.
    pub fn end_step(&mut self) {
        std::mem::swap(&mut self.now, &mut self.last);
        self.now.par_iter().for_each(|flag| flag.store(false, Ordering::Relaxed));
    }

    #[inline]
    pub fn mark_changed(&self, layout: &Layout) {
        self.now[side_key(layout.mover, layout.mover_master)].store(true, Ordering::Relaxed);
    }

    /// Did the mover side of this layout's successors (in the material these
    /// flags belong to) change in the last step?
    #[inline]
    pub fn successors_changed(&self, layout: &Layout) -> bool {
        let key = side_key(rotate(layout.opponent), rotate_square(layout.opponent_master));
        self.last[key].load(Ordering::Relaxed)
    }
}

/// Per group of a material: did any state of it get decided?
pub(super) struct GroupFlags {
    pub now: Vec<bool>,
    pub last: Vec<bool>,
}

impl GroupFlags {
    pub fn new(groups: usize) -> GroupFlags {
        GroupFlags { now: vec![false; groups], last: vec![true; groups] }
    }

    pub fn end_step(&mut self) {
        std::mem::swap(&mut self.now, &mut self.last);
        self.now.fill(false);
    }
}

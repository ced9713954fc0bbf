//! The placements a mirroring pair solves, and the compacted work-file
//! segments that hold only their words.
//!
//! With a mirror-closed card set, steps solve one placement of each mirror
//! pair (`mirror`); the other's `capture` words are never read and stay
//! zero (initialisation gives an image no `capture` bit). A streamed pair
//! stores that lane *compacted*: a group's segment in the work file holds
//! the solved placements' words one after another, zero-padded to 4096
//! bytes, about half the segment; loading lays them out again with zeros
//! for the images, so the window and the kernels see the full segment.
//! The other lanes (`won`, the landing lane of the mirror's loss steps,
//! and `lost`, which finishing reads) stay whole.
//!
//! Owns the solved-placement flags and the layout of a compacted segment;
//! knows nothing of files or steps.

use super::flags::PlacementFlags;
use super::lanes::{LaneLayout, SEGMENT_ALIGN_BYTES};
use super::mirror;
use crate::index::MaterialIndex;
use rayon::prelude::*;
use std::ops::Range;

/// The placements of a material that mirroring steps solve, by group.
pub(super) struct SolvedPlacements {
    /// A flag per placement, numbered by its first element in the plane
    /// lanes: set if steps solve it (it is not the image of an earlier
    /// placement of its group).
    flags: PlacementFlags,
    /// Per group, how many of its placements are solved.
    per_group: Vec<u32>,
    /// p * q: the words of a placement.
    placement_words: usize,
}

impl SolvedPlacements {
    /// The solved placements of `index`, whose plane lanes are laid out as
    /// `planes`: all but the images of earlier ones in their group. About
    /// 500 KB of flags at 3v3, 9.5 MB at 4v4.
    pub fn new(index: &MaterialIndex, planes: &LaneLayout) -> SolvedPlacements {
        let placement_words = index.material.mover as usize * index.material.opponent as usize;
        let flags = PlacementFlags::all_clear((planes.total_bytes() / 4) as usize, placement_words);
        // In parallel (4v4 has 76 million placements): each group sets its
        // own flags.
        let per_group = (index.groups().par_iter().enumerate())
            .map(|(g, group)| {
                let origin = (planes.segment(g).start / 4) as usize;
                let mut solved = 0;
                for (i, (mover, opponent)) in group.placements(0, group.layouts / placement_words as u64).enumerate() {
                    if !mirror::is_image(group, i as u64, mover, opponent) {
                        flags.put(origin + i * placement_words, true);
                        solved += 1;
                    }
                }
                solved
            })
            .collect();
        SolvedPlacements { flags, per_group, placement_words }
    }

    /// The flags, one per placement (set: solved).
    pub fn flags(&self) -> &PlacementFlags {
        &self.flags
    }

    /// Bytes of group `g`'s compacted segment as stored and read: its
    /// solved placements' words, padded to 4096 bytes.
    pub fn stored_bytes(&self, g: usize) -> usize {
        let bytes = self.per_group[g] as u64 * self.placement_words as u64 * 4;
        bytes.next_multiple_of(SEGMENT_ALIGN_BYTES) as usize
    }

    /// The words of a group's segment (of `layouts` layouts, whose first
    /// element in the plane lanes is `origin`) that are stored, as ranges
    /// within it: the solved placements', in order, in runs of consecutive
    /// placements.
    pub fn solved_runs(&self, origin: usize, layouts: usize) -> impl Iterator<Item = Range<usize>> + '_ {
        let w = self.placement_words;
        self.flags.set_runs(origin, layouts / w).map(move |run| run.start * w..run.end * w)
    }

    /// Are the images' words of a group's segment `words` (its layouts',
    /// first element `origin`) zero, as compacting assumes?
    pub fn images_are_zero(&self, words: &[u32], origin: usize) -> bool {
        let w = self.placement_words;
        (0..words.len() / w)
            .all(|k| self.flags.get(origin + k * w) || words[k * w..(k + 1) * w].iter().all(|&x| x == 0))
    }

    /// Lays out a group's segment (`words`: the whole segment, padding
    /// included, whose first element in the plane lanes is `origin`, of
    /// group `g`) read compacted at its front: each solved placement's
    /// words go to their place, the images' and the padding become zeros.
    /// Works from the back, so no word is overwritten before it is moved
    /// (a solved placement's place is never before its compacted one).
    pub fn expand(&self, words: &mut [u32], origin: usize, g: usize, layouts: usize) {
        let w = self.placement_words;
        let placements = layouts / w;
        debug_assert_eq!(placements * w, layouts);
        words[layouts..].fill(0);
        let mut from = self.per_group[g] as usize * w;
        for k in (0..placements).rev() {
            let at = k * w;
            if self.flags.get(origin + at) {
                from -= w;
                words.copy_within(from..from + w, at);
            } else {
                words[at..at + w].fill(0);
            }
        }
        debug_assert_eq!(from, 0, "every solved placement's words were laid out");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Material;
    use crate::solver::lanes::LaneLayout;

    /// A segment stored as its solved runs and expanded again is the
    /// segment, when the images' words are zero; the stored bytes are
    /// about half.
    #[test]
    fn solved_runs_expand_to_the_segment() {
        let index = MaterialIndex::new(Material::new(2, 2));
        let planes = LaneLayout::new(&index, 4);
        let solved = SolvedPlacements::new(&index, &planes);
        let w = 4;
        let (mut stored, mut whole) = (0, 0);
        for (g, group) in index.groups().iter().enumerate() {
            let layouts = group.layouts as usize;
            let origin = (planes.segment(g).start / 4) as usize;
            let span = planes.span(g..g + 1);
            let len = ((span.end - span.start) / 4) as usize;
            // Words that differ everywhere, zero in the images.
            let mut segment: Vec<u32> = (0..len as u32).map(|x| x * 7 + 1).collect();
            segment[layouts..].fill(0);
            for k in 0..layouts / w {
                if !solved.flags().get(origin + k * w) {
                    segment[k * w..(k + 1) * w].fill(0);
                }
            }
            assert!(solved.images_are_zero(&segment[..layouts], origin));
            let compacted: Vec<u32> =
                solved.solved_runs(origin, layouts).flat_map(|run| segment[run].to_vec()).collect();
            assert!(compacted.len() * 4 <= solved.stored_bytes(g));
            let mut read = vec![u32::MAX; len];
            read[..compacted.len()].copy_from_slice(&compacted);
            solved.expand(&mut read, origin, g, layouts);
            assert_eq!(read, segment, "group {g}");
            if let Some(image) = (0..layouts / w).find(|k| !solved.flags().get(origin + k * w)) {
                segment[image * w] = 1;
                assert!(!solved.images_are_zero(&segment[..layouts], origin));
            }
            stored += compacted.len();
            whole += layouts;
        }
        // A few placements are their own image.
        assert!(stored * 2 >= whole && stored * 2 < whole + whole / 20, "{stored} of {whole}");
    }
}

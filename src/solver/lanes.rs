//! Lanes: the per-layout arrays a material is solved in (five bit planes and
//! the value bytes), laid out group by group, and the regions of memory that
//! hold some or all of their segments.
//!
//! Owns the byte layout of a lane (one aligned segment per index group, in
//! group order, so a slice of groups is one contiguous range of a file) and
//! the carving of regions into disjoint per-group slices. Knows nothing of
//! moves or values, and does no I/O.

use crate::index::MaterialIndex;
use crate::rules::CARD_STATES;
use rayon::prelude::*;
use std::ops::Range;

/// Every segment starts at a multiple of this many bytes, so that each can
/// be read and written with O_DIRECT without touching its neighbours.
pub const SEGMENT_ALIGN_BYTES: u64 = 4096;

/// The arrays of a material under solving.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    /// Card states won so far (u32 per layout).
    Won,
    /// Card states lost so far.
    Lost,
    /// Card states lost in the last loss step.
    Fresh,
    /// Undecided card states whose best capture still bounds them: a win
    /// still to fall due, a draw, or a loss deeper than the last loss step.
    Capture,
    /// Value bytes, 30 per layout.
    Values,
    /// A sparse group's own `won` words with their layout numbers (two u32
    /// per listed layout), in a segment laid out like a plane's: see
    /// `solver::sparse`.
    SparseWon,
    /// A sparse group's own `lost` and `capture` words (two u32 per listed
    /// layout, in `SparseWon`'s order).
    SparseRest,
}

impl Lane {
    pub const ALL: [Lane; 5] = [Lane::Won, Lane::Lost, Lane::Fresh, Lane::Capture, Lane::Values];

    pub fn bytes_per_layout(self) -> u64 {
        match self {
            Lane::Values => CARD_STATES as u64,
            _ => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Lane::Won => "won",
            Lane::Lost => "lost",
            Lane::Fresh => "fresh",
            Lane::Capture => "capture",
            Lane::Values => "values",
            Lane::SparseWon => "sparse-won",
            Lane::SparseRest => "sparse-rest",
        }
    }
}

/// Where each group's segment of a lane lies, in bytes from the lane's start.
#[derive(Clone, Debug)]
pub struct LaneLayout {
    /// Byte offset of each group's segment, then the lane's padded length.
    offsets: Vec<u64>,
    /// Byte length of each group's segment (unpadded).
    lens: Vec<u64>,
    bytes_per_layout: u64,
}

impl LaneLayout {
    pub fn new(index: &MaterialIndex, bytes_per_layout: u64) -> LaneLayout {
        let mut offsets = Vec::with_capacity(index.groups().len() + 1);
        let mut lens = Vec::with_capacity(index.groups().len());
        let mut at = 0u64;
        for group in index.groups() {
            offsets.push(at);
            let len = group.layouts * bytes_per_layout;
            lens.push(len);
            at += len.div_ceil(SEGMENT_ALIGN_BYTES) * SEGMENT_ALIGN_BYTES;
        }
        offsets.push(at);
        LaneLayout { offsets, lens, bytes_per_layout }
    }

    /// Number of groups (segments).
    pub fn groups(&self) -> usize {
        self.lens.len()
    }

    /// Padded length of the whole lane in bytes.
    pub fn total_bytes(&self) -> u64 {
        *self.offsets.last().expect("a lane has an end offset")
    }

    /// Byte range of group `g`'s segment (unpadded).
    pub fn segment(&self, g: usize) -> Range<u64> {
        self.offsets[g]..self.offsets[g] + self.lens[g]
    }

    /// Padded byte range of groups `groups` (consecutive): what one read of
    /// them covers.
    pub fn span(&self, groups: Range<usize>) -> Range<u64> {
        self.offsets[groups.start]..self.offsets[groups.end]
    }

    pub fn bytes_per_layout(&self) -> u64 {
        self.bytes_per_layout
    }
}

/// Where a region of memory holds each group's segment of one lane, in
/// elements of the region.
pub trait SegmentMap: Sync {
    /// Element range of group `g` within the region; the group must be in it.
    fn elements(&self, g: usize) -> Range<usize>;
}

/// A region holding a whole lane, or the consecutive groups starting at
/// `first_byte`, at their lane offsets.
pub struct Span<'a> {
    pub layout: &'a LaneLayout,
    /// Lane byte offset of the region's first element.
    pub first_byte: u64,
    /// Bytes per element of the region (4 for planes, 1 for values).
    pub element_bytes: u64,
}

impl SegmentMap for Span<'_> {
    #[inline]
    fn elements(&self, g: usize) -> Range<usize> {
        let bytes = self.layout.segment(g);
        debug_assert!(bytes.start >= self.first_byte);
        ((bytes.start - self.first_byte) / self.element_bytes) as usize
            ..((bytes.end - self.first_byte) / self.element_bytes) as usize
    }
}

/// Splits `data` into disjoint mutable slices at `ranges`, which must be
/// sorted and non-overlapping.
pub fn carve_mut<T>(mut data: &mut [T], ranges: impl IntoIterator<Item = Range<usize>>) -> Vec<&mut [T]> {
    let mut out = Vec::new();
    let mut at = 0;
    for range in ranges {
        assert!(range.start >= at, "segments must be sorted and disjoint");
        let rest = std::mem::take(&mut data);
        let (_, tail) = rest.split_at_mut(range.start - at);
        let (head, tail) = tail.split_at_mut(range.end - range.start);
        out.push(head);
        data = tail;
        at = range.end;
    }
    out
}

/// Resident storage of every lane of one material, at lane offsets.
pub struct ResidentLanes {
    pub won: Vec<u32>,
    pub lost: Vec<u32>,
    pub fresh: Vec<u32>,
    pub capture: Vec<u32>,
    pub values: Vec<u8>,
    /// Per layout (indexed like the planes), the depth at which the next
    /// capture value of its undecided states falls due, [`NO_EVENT`] if
    /// none: a step reads a layout's value bytes only at that depth.
    pub next_event: Vec<u8>,
}

/// [`ResidentLanes::next_event`] of a layout none of whose undecided
/// states has a win or loss by capture to come (depths stop at 253 plies).
pub const NO_EVENT: u8 = u8::MAX;

impl ResidentLanes {
    pub fn new(planes: &LaneLayout, values: &LaneLayout) -> ResidentLanes {
        let plane = || zeroed((planes.total_bytes() / 4) as usize);
        ResidentLanes {
            won: plane(),
            lost: plane(),
            fresh: plane(),
            capture: plane(),
            values: zeroed(values.total_bytes() as usize),
            next_event: zeroed((planes.total_bytes() / 4) as usize),
        }
    }

    /// Bytes of a material's resident lanes: the four planes, the values
    /// and `next_event`.
    pub fn bytes(planes: &LaneLayout, values: &LaneLayout) -> u64 {
        4 * planes.total_bytes() + values.total_bytes() + planes.total_bytes() / 4
    }

    /// The value lane; the planes are freed.
    pub fn into_values(self) -> Vec<u8> {
        self.values
    }
}

/// A vector of `len` zeros whose pages are all mapped writable before any
/// kernel reads them. Left to the kernel's lazy zero pages, a page read
/// before it is first written maps the shared zero page, and the copy on
/// the first write then flushes the TLB of every core (an inter-processor
/// interrupt, slow in a VM); the kernels read most lane words before
/// writing them.
///
/// The memory comes zeroed from the allocator (for integers `vec!` asks for
/// zeroed memory, which a fresh mapping is without being written), and its
/// pages are made present with `MADV_POPULATE_WRITE`, chunks in parallel:
/// no page fault per page, no pass of stores. Setting up 6-men 3v3 (1.6 GB
/// of lanes) took 0.88 s of CPU instead of 1.10 s, when every page was
/// written in parallel (docs/BENCHMARKS.md, session 46). Where the kernel
/// lacks it (before Linux 5.14), a store per page does the same.
fn zeroed<T: Default + Copy + Send + Sync>(len: usize) -> Vec<T> {
    zeroed_by(len, populate_writable)
}

/// [`zeroed`] with `populate` making a chunk's whole pages present, or
/// saying it cannot (the tests take that path on any kernel).
fn zeroed_by<T: Default + Copy + Send + Sync>(len: usize, populate: impl Fn(&mut [T]) -> bool + Sync) -> Vec<T> {
    let mut lane = vec![T::default(); len];
    let elements_per_page = (PAGE_BYTES / std::mem::size_of::<T>()).max(1);
    lane.par_chunks_mut(POPULATE_CHUNK_BYTES / std::mem::size_of::<T>()).for_each(|chunk| {
        let populated = populate(chunk);
        let step = if populated { chunk.len() } else { elements_per_page };
        // Without it, every page; with it, the chunk's first and last
        // (partly outside it, so not populated: an allocation need not
        // start on a page).
        let last = chunk.len() - 1;
        for at in (0..chunk.len()).step_by(step).chain([last]) {
            // An opaque zero, so that the store is not left out as one of
            // what the (zeroed) memory already holds.
            chunk[at] = std::hint::black_box(T::default());
        }
    });
    lane
}

/// The smallest page size of Linux on the machines this runs on: the step
/// of the fallback's stores.
const PAGE_BYTES: usize = 4096;

/// Bytes one worker populates at a time: big enough that the system call
/// costs nothing against the zeroing, small enough that a 127 MB plane
/// splits over both workers.
const POPULATE_CHUNK_BYTES: usize = 16 << 20;

/// Makes the whole pages within `memory` present and writable, without
/// changing a byte of them; false if the kernel cannot.
fn populate_writable<T>(memory: &mut [T]) -> bool {
    #[cfg(target_os = "linux")]
    {
        let start = memory.as_mut_ptr() as usize;
        let (first, end) =
            (start.next_multiple_of(PAGE_BYTES), (start + std::mem::size_of_val(memory)) / PAGE_BYTES * PAGE_BYTES);
        if end <= first {
            return true;
        }
        // SAFETY: the range lies within `memory`, which this thread holds
        // uniquely; MADV_POPULATE_WRITE only faults its pages in as if
        // written, and leaves their contents as they are.
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_POPULATE_WRITE) == 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = memory;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Material;

    #[test]
    fn zeroed_lanes_hold_zeros_only() {
        // Lengths around a populated chunk and a page, bytes and words.
        let chunk = POPULATE_CHUNK_BYTES;
        for len in [1, 4095, 4096, 4097, chunk - 1, chunk, 2 * chunk + 12_345] {
            assert!(zeroed::<u8>(len).iter().all(|&b| b == 0), "{len} bytes");
            assert!(zeroed::<u32>(len / 4 + 1).iter().all(|&w| w == 0), "{} words", len / 4 + 1);
            // The fallback, a store per page, as on a kernel without
            // MADV_POPULATE_WRITE.
            assert!(zeroed_by::<u32>(len, |_| false).iter().all(|&w| w == 0), "{len} words, by stores");
        }
        assert!(zeroed::<u32>(0).is_empty());
    }

    #[test]
    fn segments_are_aligned_disjoint_and_in_order() {
        let index = MaterialIndex::new(Material::new(2, 3));
        for lane in Lane::ALL {
            let layout = LaneLayout::new(&index, lane.bytes_per_layout());
            let mut end = 0;
            for (g, group) in index.groups().iter().enumerate() {
                let segment = layout.segment(g);
                assert_eq!(segment.start % SEGMENT_ALIGN_BYTES, 0);
                assert!(segment.start >= end);
                assert_eq!(segment.end - segment.start, group.layouts * lane.bytes_per_layout());
                end = segment.end;
            }
            assert!(layout.total_bytes() >= end && layout.total_bytes().is_multiple_of(SEGMENT_ALIGN_BYTES));
        }
    }

    #[test]
    fn carving_gives_the_requested_ranges() {
        let mut data: Vec<u32> = (0..20).collect();
        let parts = carve_mut(&mut data, [1..3, 3..4, 10..20]);
        assert_eq!(parts.iter().map(|p| p.to_vec()).collect::<Vec<_>>(), vec![vec![1, 2], vec![3], (10..20).collect()]);
    }
}

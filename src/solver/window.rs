//! The memory a streamed pair is solved in, allocated once from the budget:
//! windows of own group segments (four planes, the values, a plane of due
//! states filled from the capture schedule) and slice
//! buffers for landing (or captured) slices, and the reads and writes that
//! move segments between them and the work files.
//!
//! Owns the buffers' sizes (the smallest budget a table or pair admits, and
//! what one window needs), the packing of a batch of groups into a window
//! and the read requests that fill it; knows nothing of moves or steps. With two windows
//! and two slice buffers the solver stores the previous batch and reads the
//! next while it computes the current one (see `step.rs`).

use super::capture_schedule::CaptureSchedule;
use super::decision_log::LandingChunks;
use super::disk::{AlignedBuf, DiskIo};
use super::entries::{Lent, Unpacker};
use super::flags::PlacementFlags;
use super::lanes::{Lane, LaneLayout, SegmentMap, carve_mut};
use super::schedule::MoverSlices;
use super::sparse::{self, Base, GroupWords, Pick};
use super::{FinishedMaterial, IO_BLOCKS, IoTotals, Own, SolveError, Work};
use crate::blockio::FileId;
use crate::index::{Material, MaterialIndex};
use crate::rules::CARD_STATES;
use crate::value::ValueWidth;
use rayon::prelude::*;
use std::ops::Range;
use std::sync::{Condvar, Mutex, PoisonError};

/// A read of a file range into memory, for [`DiskIo::read_many`].
pub(super) type ReadRequest<'a> = (FileId, Range<u64>, &'a mut [u8]);

/// Where the lanes of a region of groups are in a window: group, element range.
pub(super) struct Packed {
    entries: Vec<(usize, Range<usize>)>,
}

impl SegmentMap for Packed {
    fn elements(&self, g: usize) -> Range<usize> {
        let at = self.entries.binary_search_by_key(&g, |e| e.0).expect("group is in the window");
        self.entries[at].1.clone()
    }
}

/// What loading a batch does with its value segments.
#[derive(Clone, Copy)]
pub(super) enum ValueSegments {
    /// Zeroes them: initialisation folds captures into zeros.
    Zeroed,
    /// Leaves them as they are: steps do not read value bytes, and
    /// finishing writes every byte of each layout (`kernel::settle`)
    /// before it reads any.
    Untouched,
}

/// Bytes of the pieces [`Window::load`] zeroes side by side: big enough
/// that a piece costs far more than handing it to a worker, small enough
/// to share a window's segments evenly.
const ZEROING_PIECE_BYTES: usize = 1 << 20;

/// Plane buffers of a window: the four plane lanes and the due states.
pub(super) const WINDOW_PLANES: u64 = 5;

/// The plane lanes a window holds a buffer of, in buffer order (the fifth
/// plane buffer is `due`). All but `fresh` are stored in work files.
pub(super) const WINDOW_LANES: [Lane; 4] = [Lane::Won, Lane::Lost, Lane::Fresh, Lane::Capture];
const _: () = assert!(WINDOW_PLANES == WINDOW_LANES.len() as u64 + 1, "the lanes and `due`");

/// The plane buffer of `lane` (one of [`WINDOW_LANES`]).
fn buffer_of(lane: Lane) -> usize {
    WINDOW_LANES.iter().position(|&l| l == lane).expect("a window lane")
}

/// The buffer of `fresh` among a window's planes (where sparse groups'
/// `SparseRest` records are read and gathered).
const FRESH_BUFFER: usize = 2;
const _: () = assert!(matches!(WINDOW_LANES[FRESH_BUFFER], Lane::Fresh));

/// One window: a batch's segments of the four planes (won, lost, fresh,
/// capture) and of the values, and a plane of due states (no lane:
/// filled from the capture schedule by streamed steps).
pub(super) struct OwnBuffers {
    planes: Vec<AlignedBuf>,
    values: AlignedBuf,
    due: AlignedBuf,
    /// Per placement of the batch, numbered by its first element in the
    /// plane buffers: does the step look at it? Clear only for the
    /// placements of a sparse group over holes that list no layout, whose
    /// words [`OwnBuffers::prepare`] leaves as they were (see
    /// `sparse`).
    live: PlacementFlags,
    /// The groups whose `capture` segment (the only lane stored
    /// compacted) the last [`OwnBuffers::plan_load`] reads compacted
    /// (`compact`), for [`OwnBuffers::preparation`] to lay out once they
    /// are read.
    compacted: Vec<usize>,
    /// Bytes per value of the material loaded last (`Work::width`).
    width: ValueWidth,
}

/// The streamed pair's buffers.
pub(super) struct Window {
    /// One window, or two: then the next batch is read into one while the
    /// current batch is computed in the other.
    pub owns: Vec<OwnBuffers>,
    /// Slice buffers, as many as windows.
    pub slices: Vec<AlignedBuf>,
    pub io: IoTotals,
}

impl Window {
    /// One window (of five `plane_bytes` and one `value_bytes` buffer) and
    /// slice buffer per element of `slice_bytes` (1 or 2), of those sizes,
    /// for a pair whose placements have `block_words` layouts (p * q).
    pub fn new(
        slice_bytes: &[u64],
        plane_bytes: u64,
        value_bytes: u64,
        block_words: usize,
    ) -> Result<Window, SolveError> {
        let mut owns = Vec::new();
        let mut slices = Vec::new();
        for &slice_bytes in slice_bytes {
            let planes =
                WINDOW_LANES.iter().map(|_| AlignedBuf::zeroed(plane_bytes as usize)).collect::<Result<_, _>>()?;
            let (values, due) = (AlignedBuf::zeroed(value_bytes as usize)?, AlignedBuf::zeroed(plane_bytes as usize)?);
            let live = PlacementFlags::all_set(plane_bytes as usize / 4, block_words);
            let (compacted, width) = (Vec::new(), ValueWidth::Byte);
            owns.push(OwnBuffers { planes, values, due, live, compacted, width });
            slices.push(AlignedBuf::zeroed(slice_bytes as usize)?);
        }
        Ok(Window { owns, slices, io: IoTotals::default() })
    }

    /// Bytes of values the first window holds (what finishing loads).
    pub fn value_capacity(&self) -> u64 {
        self.owns[0].values.len() as u64
    }

    /// Splits `groups` into as few batches as fit one window each (in
    /// order), of about equal size: a run of groups split greedily ends in
    /// a small batch, and in a step that batch is computed while the next
    /// job's landing slice is read, so the workers waited on the disk there
    /// (about 95% of a 4v4 step's wait for I/O, docs/BENCHMARKS.md).
    pub fn batches(&self, work: &Work, groups: &[usize]) -> Vec<Vec<usize>> {
        let caps = (self.owns[0].planes[0].len() as u64, self.owns[0].values.len() as u64);
        let sizes: Vec<(u64, u64)> =
            groups.iter().map(|&g| (padded_len(&work.planes, g), padded_len(&work.values, g))).collect();
        for &(p, v) in &sizes {
            assert!(p <= caps.0 && v <= caps.1, "the budget check admits every group");
        }
        let greedy = greedy_batches(&sizes, caps);
        // One more batch than the fewest, if even batches need it, is as
        // good: what costs is a batch much smaller than its neighbours.
        let even = (greedy.len()..=greedy.len() + 1).find_map(|count| even_batches(&sizes, caps, count));
        even.unwrap_or(greedy).into_iter().map(|batch| batch.map(|i| groups[i]).collect()).collect()
    }

    /// Brings the segments of `batch` into the first window
    /// ([`OwnBuffers::load`]). Returns the plane and value maps.
    pub fn load(
        &mut self,
        disk: &mut DiskIo,
        work: &Work,
        batch: &[usize],
        what: (&[Lane], PlaneLoad, ValueSegments),
    ) -> Result<(Packed, Packed), SolveError> {
        self.owns[0].load(disk, work, batch, what, &mut self.io)
    }

    /// Writes `lanes` of the first window's segments of the groups for which
    /// `changed` holds back to the work files.
    pub fn store(
        &mut self,
        disk: &mut DiskIo,
        work: &Work,
        plane_map: &Packed,
        lanes: &[Lane],
        changed: impl Fn(usize) -> bool,
    ) -> Result<(), SolveError> {
        self.owns[0].store(disk, work, plane_map, lanes, changed, &mut self.io)
    }
}

impl OwnBuffers {
    /// Brings the segments of `batch` into this window: reads the plane
    /// lanes `lanes`, treats the others as `others` says (zeroed, or left
    /// as they were where nothing reads them), and loads the values as
    /// `values` says. With the sparse lanes, a sparse group's records are
    /// laid over the dense segments read. Returns the plane and value maps.
    pub fn load(
        &mut self,
        disk: &mut DiskIo,
        work: &Work,
        batch: &[usize],
        (lanes, others, values): (&[Lane], PlaneLoad, ValueSegments),
        io: &mut IoTotals,
    ) -> Result<(Packed, Packed), SolveError> {
        assert_ne!(others, PlaneLoad::Read, "the lanes read are named");
        let reads = |lane: Lane, _: usize| if lanes.contains(&lane) { PlaneLoad::Read } else { others };
        let (pm, vm, mut requests, mut zeros) = self.plan_load(work, batch, (&reads, values), io);
        // The workers wait for the load (initialisation loads in turn):
        // zero on all of them. Whole segments would leave one worker with
        // the biggest; 1 MiB pieces even it out.
        zeros
            .par_iter_mut()
            .flat_map(|segment| segment.par_chunks_mut(ZEROING_PIECE_BYTES))
            .for_each(|piece| piece.fill(0));
        disk.read_many(&mut requests)?;
        drop(requests);
        let records = lanes.contains(&Lane::SparseWon);
        debug_assert!(!records || lanes.contains(&Lane::SparseRest), "records are read whole");
        let dense: &(dyn Fn(usize) -> Base + Sync) = &|_| Base::Dense;
        // On this thread alone, as finishing reads the next batch while the
        // workers pack the last.
        let preparation = self.preparation(work, (&pm, &vm), false);
        preparation.help(work, records.then_some(dense), None);
        preparation.finish()?;
        Ok((pm, vm))
    }

    /// Swaps this window's value buffer with `values`. Finishing lends the
    /// buffer to the packer while the window's planes load the next batch,
    /// leaving an empty one in its place (loads that leave values untouched
    /// never carve them), and swaps it back after.
    pub fn swap_values(&mut self, values: &mut AlignedBuf) {
        std::mem::swap(&mut self.values, values);
    }

    /// Packs `batch` into this window: returns the plane and value maps,
    /// the reads that fill the groups' plane segments that `reads(lane, g)`
    /// asks for (and the values, as `values` says), and the segments to
    /// zero: the other planes', for the caller to clear (in parallel, where
    /// the workers would wait for it).
    pub fn plan_load<'a>(
        &'a mut self,
        work: &Work,
        batch: &[usize],
        (reads, values): (PlaneReads, ValueSegments),
        io: &mut IoTotals,
    ) -> (Packed, Packed, Vec<ReadRequest<'a>>, Vec<&'a mut [u8]>) {
        let (mut plane_entries, mut value_entries) = (Vec::new(), Vec::new());
        let (mut plane_bytes, mut value_bytes) = (Vec::new(), Vec::new());
        let (mut p_at, mut v_at) = (0usize, 0usize);
        self.width = work.width;
        let layout_bytes = CARD_STATES * work.width.bytes();
        for &g in batch {
            let p_len = padded_len(&work.planes, g) as usize;
            let v_len = padded_len(&work.values, g) as usize;
            let layouts = work.index.groups()[g].layouts as usize;
            plane_entries.push((g, p_at / 4..p_at / 4 + layouts));
            value_entries.push((g, v_at..v_at + layouts * layout_bytes));
            plane_bytes.push(p_at..p_at + p_len);
            value_bytes.push(v_at..v_at + v_len);
            p_at += p_len;
            v_at += v_len;
        }
        let (mut requests, mut zeros) = (Vec::new(), Vec::new());
        self.compacted.clear();
        // A sparse group's records are read into its `due` (`SparseWon`)
        // and `fresh` (`SparseRest`) segments, which `prepare` lays
        // over its planes and clears.
        let sparse_read = |lane: Lane, g: usize| {
            let listed = work.groups[g].sparse_layouts;
            let bytes = match lane {
                Lane::Fresh => sparse::rest_bytes(listed),
                _ => sparse::won_bytes(listed),
            };
            let sparse_lane = if lane == Lane::Fresh { Lane::SparseRest } else { Lane::SparseWon };
            (listed > 0 && reads(sparse_lane, g) == PlaneLoad::Read).then_some((sparse_lane, bytes))
        };
        // Untouched values are not carved: a window may have lent its
        // value buffer out (`swap_values`).
        let value_buffer = match values {
            ValueSegments::Zeroed => Some((&mut self.values, Lane::Values)),
            ValueSegments::Untouched => None,
        };
        let buffers = self.planes.iter_mut().zip(WINDOW_LANES).chain(value_buffer);
        for (buffer, lane) in buffers.chain([(&mut self.due, Lane::SparseWon)]) {
            let (ranges, layout) =
                if lane == Lane::Values { (&value_bytes, &work.values) } else { (&plane_bytes, &work.planes) };
            let segments = carve_mut(buffer.bytes_mut(), ranges.iter().cloned());
            for (&g, into) in batch.iter().zip(segments) {
                let read = match (lane, values) {
                    (Lane::Values, _) => Some(false),
                    (Lane::Fresh | Lane::SparseWon, _) => match sparse_read(lane, g) {
                        Some((sparse_lane, bytes)) => {
                            let (records, rest) = into.split_at_mut(bytes);
                            // `fresh` must start cleared, but over holes
                            // only in the live placements, which
                            // `prepare` clears; `due` is read only
                            // where `prepare` filled it.
                            if lane == Lane::Fresh && reads(Lane::Won, g) == PlaneLoad::Read {
                                rest.fill(0);
                            }
                            io.bytes_read += bytes as u64;
                            let span = work.planes.segment(g).start..work.planes.segment(g).start + bytes as u64;
                            requests.push((work.files().read_file(sparse_lane, g), span, records));
                            continue;
                        }
                        // `due` is filled by `prepare`; a dense
                        // `fresh` is zeroed unless the load leaves it.
                        None => (lane == Lane::Fresh && reads(Lane::Fresh, g) != PlaneLoad::Left).then_some(false),
                    },
                    // A sparse group whose dense planes are not read gets
                    // all four from `prepare` (holes and records).
                    (Lane::Won | Lane::Lost | Lane::Capture, _)
                        if work.groups[g].sparse_layouts > 0 && reads(Lane::Won, g) != PlaneLoad::Read =>
                    {
                        debug_assert_ne!(reads(lane, g), PlaneLoad::Read);
                        None
                    }
                    _ => match reads(lane, g) {
                        PlaneLoad::Read => Some(true),
                        PlaneLoad::Zeroed => Some(false),
                        PlaneLoad::Left => None,
                    },
                };
                match read {
                    Some(true) => {
                        let span = layout.span(g..g + 1);
                        let bytes = match (&work.solved, lane) {
                            (Some(solved), Lane::Capture) => {
                                self.compacted.push(g);
                                solved.stored_bytes(g)
                            }
                            _ => into.len(),
                        };
                        io.bytes_read += bytes as u64;
                        let span = span.start..span.start + bytes as u64;
                        requests.push((work.files().read_file(lane, g), span, &mut into[..bytes]));
                    }
                    Some(false) => zeros.push(into),
                    None => {}
                }
            }
        }
        (Packed { entries: plane_entries }, Packed { entries: value_entries }, requests, zeros)
    }

    /// Lays out what the last load read, group by group and the groups in
    /// parallel: the segments read compacted (see `compact`); with `base`
    /// (the load read the sparse records), the records of the sparse groups
    /// over their planes (`base(g)`: over holes for a step, over the dense
    /// segments read for finishing or relisting), their `fresh` records
    /// cleared; with `due`, the due states of the groups it names,
    /// unpacked from the capture schedule's chunks that
    /// [`OwnBuffers::read_due`] read into their value segments. Call once
    /// the load's reads are done, before anything reads the window.
    ///
    /// Each group touches only its own segments and its placements' live
    /// flags, which are whole words of its own. Over holes it writes
    /// all four planes of the group's live placements only (`plan_load`
    /// leaves them as they were when it does not read the group's dense
    /// `won`), and the live flags say which those are: every placement of
    /// the other groups is live. A step's first job is laid out so; the
    /// others are shared between the thread that read them and the
    /// workers ([`OwnBuffers::preparation`]): on that thread alone, in turn
    /// after its reads, this was most of its CPU time in 8-men 4v4's
    /// later steps, where the workers waited for it.
    pub fn prepare(
        &mut self,
        work: &Work,
        maps: (&Packed, &Packed),
        base: Option<&(dyn Fn(usize) -> Base + Sync)>,
        due: Option<DueStates>,
    ) -> Result<(), SolveError> {
        let preparation = self.preparation(work, maps, due.is_some());
        preparation.help_on_workers(work, base, due.as_ref());
        preparation.finish()
    }

    /// [`OwnBuffers::prepare`] as work to share: each group taken by
    /// whichever thread is free ([`Preparation::help`]). With `rooms`, the
    /// value segments are handed out for the schedule's chunks.
    pub fn preparation(
        &mut self,
        work: &Work,
        (plane_map, value_map): (&Packed, &Packed),
        rooms: bool,
    ) -> Preparation<'_> {
        let mut compacted = std::mem::take(&mut self.compacted);
        compacted.sort_unstable();
        // Records and their padding fill the padded segments.
        let padded =
            |(g, range): &(usize, Range<usize>)| range.start..range.start + padded_len(&work.planes, *g) as usize / 4;
        let ranges: Vec<Range<usize>> = plane_map.entries.iter().map(padded).collect();
        let [won, lost, fresh, capture] = &mut self.planes[..] else { unreachable!("a window has four plane lanes") };
        fn carve<'b>(buffer: &'b mut AlignedBuf, ranges: &[Range<usize>]) -> std::vec::IntoIter<&'b mut [u32]> {
            carve_mut(buffer.words_mut(), ranges.iter().cloned()).into_iter()
        }
        fn next<'b>(segments: &mut std::vec::IntoIter<&'b mut [u32]>) -> &'b mut [u32] {
            segments.next().expect("a segment per group")
        }
        let (mut won, mut lost, mut fresh) = (carve(won, &ranges), carve(lost, &ranges), carve(fresh, &ranges));
        let mut capture = carve(capture, &ranges);
        let mut due_words = carve(&mut self.due, &ranges);
        // Values are carved only for the schedule's chunks: finishing may
        // have lent the buffer out (`swap_values`).
        let mut rooms = rooms.then(|| {
            let rooms = value_map.entries.iter().map(|(g, bytes)| value_room(work, *g, bytes));
            carve_mut(self.values.bytes_mut(), rooms).into_iter()
        });
        let mut groups = Vec::with_capacity(plane_map.entries.len());
        for &(g, ref range) in &plane_map.entries {
            let planes = [next(&mut won), next(&mut lost), next(&mut fresh), next(&mut capture)];
            let room = rooms.as_mut().map(|rooms| rooms.next().expect("a value segment per group"));
            let compacted = compacted.binary_search(&g).is_ok();
            groups.push(GroupSegments { g, first: range.start, planes, due: next(&mut due_words), room, compacted });
        }
        // Taken from the back: the largest first, so that no thread is
        // left with a large group as the others run out.
        groups.sort_by_key(|group| group.planes[0].len());
        Preparation { groups: Mutex::new(groups), live: &self.live, failed: Mutex::new(None) }
    }

    /// Reads the capture schedule's chunks of the groups `due` names into
    /// their value segments (free in a step), for [`OwnBuffers::prepare`]
    /// to unpack into `due`: call after [`OwnBuffers::patch_landing_won`],
    /// which reads through the value buffer. Returns the bytes read.
    pub fn read_due(&mut self, work: &Work, value_map: &Packed, due: &DueStates) -> Result<u64, SolveError> {
        let mut read = 0;
        for (g, bytes) in value_map.entries.iter().filter(|(g, _)| (due.groups)(*g)) {
            let room = &mut self.values.bytes_mut()[value_room(work, *g, bytes)];
            read += due.schedule.read_due((*g, due.depth_plies), room)?;
        }
        Ok(read)
    }

    /// Gathers the records of the given groups, each picked as `pick` says,
    /// with the number of layouts it must list, into their `due`
    /// (`SparseWon`) and `fresh` (`SparseRest`) segments (free once a batch
    /// is computed and logged), for [`OwnBuffers::store_sparse`]: a group
    /// that turns sparse or relists ([`Pick::Undecided`]) both lanes, one
    /// that stays listed only `listed_lane`, the step's, which is all it
    /// stores. The groups (increasing) are gathered in parallel.
    pub fn gather_sparse(&mut self, work: &Work, plane_map: &Packed, groups: &[(usize, Pick, u32)], listed_lane: Lane) {
        assert!(matches!(listed_lane, Lane::SparseWon | Lane::SparseRest), "records are stored in the sparse lanes");
        let [won, lost, fresh, capture] = &mut self.planes[..] else { unreachable!("a window has four plane lanes") };
        // Records and their padding go to the padded segments.
        let padded = |g: usize| {
            let start = plane_map.elements(g).start;
            start..start + padded_len(&work.planes, g) as usize / 4
        };
        let won_out = carve_mut(self.due.words_mut(), groups.iter().map(|&(g, ..)| padded(g)));
        let rest_out = carve_mut(fresh.words_mut(), groups.iter().map(|&(g, ..)| padded(g)));
        let own_planes = [&*won, &*lost, &*capture];
        let live = &self.live;
        groups.par_iter().zip(won_out).zip(rest_out).for_each(|((&(g, pick, expected), won_out), rest_out)| {
            let range = plane_map.elements(g);
            let own = own_planes.map(|plane| &plane.words()[range.clone()]);
            let placements = range.len() / live.block_words();
            let live_placements = live.set_blocks(range.start, placements);
            let both = pick == Pick::Undecided;
            let won_out = (both || listed_lane == Lane::SparseWon).then_some(won_out);
            let rest_out = (both || listed_lane == Lane::SparseRest).then_some(rest_out);
            let listed = sparse::gather(own, pick, (won_out, rest_out), live.block_words(), live_placements);
            // A record missing or extra would leave a layout's words wrong
            // for the rest of the pair.
            assert_eq!(listed, expected, "group {g} lists the layouts it listed before");
        });
    }

    /// Queues writes of the records (`lanes`: `SparseWon`, `SparseRest` or
    /// both) of the given (group, records) that
    /// [`OwnBuffers::gather_sparse`] gathered.
    pub fn store_sparse(
        &self,
        disk: &mut DiskIo,
        work: &Work,
        plane_map: &Packed,
        groups: &[(usize, u32)],
        lanes: &[Lane],
        io: &mut IoTotals,
    ) -> Result<(), SolveError> {
        for &(g, listed) in groups {
            let at = plane_map.elements(g).start * 4;
            let segment_start = work.planes.segment(g).start;
            for &lane in lanes {
                let (from, bytes) = match lane {
                    Lane::SparseWon => (&self.due, sparse::won_bytes(listed)),
                    Lane::SparseRest => (&self.planes[FRESH_BUFFER], sparse::rest_bytes(listed)),
                    _ => unreachable!("only the sparse lanes hold records"),
                };
                disk.write(work.files().write_file(lane, g), segment_start, &from.bytes()[at..at + bytes])?;
                io.bytes_written += bytes as u64;
            }
        }
        Ok(())
    }

    /// Queues writes of `lanes` of the segments of the groups for which
    /// `changed` holds.
    pub fn store(
        &self,
        disk: &mut DiskIo,
        work: &Work,
        plane_map: &Packed,
        lanes: &[Lane],
        changed: impl Fn(usize) -> bool,
        io: &mut IoTotals,
    ) -> Result<(), SolveError> {
        for (i, &lane) in WINDOW_LANES.iter().enumerate() {
            if !lanes.contains(&lane) {
                continue;
            }
            for (g, range) in plane_map.entries.iter().filter(|(g, _)| changed(*g)) {
                let len = padded_len(&work.planes, *g) as usize;
                let from = &self.planes[i].bytes()[range.start * 4..range.start * 4 + len];
                // A segment of zeros (of `capture`, say) is
                // stored as a hole: no disk, no write. Nothing of
                // this segment is queued (a pass writes a group once and
                // drains before the next pass), so the punch cannot race a
                // write of it.
                let file = if is_zero(from) {
                    match work.files().write_zeros(lane, *g)? {
                        None => continue,
                        Some(file) => file,
                    }
                } else {
                    work.files().write_file(lane, *g)
                };
                let offset = work.planes.segment(*g).start;
                match (&work.solved, lane) {
                    // Only the solved placements' words: the images' are
                    // zero (`compact`).
                    (Some(solved), Lane::Capture) => {
                        let (words, origin) = (&self.planes[i].words()[range.clone()], (offset / 4) as usize);
                        debug_assert!(solved.images_are_zero(words, origin), "{} of group {g}", lane.name());
                        let runs = solved.solved_runs(origin, range.len());
                        let pieces = runs.map(|run| &from[run.start * 4..run.end * 4]);
                        io.bytes_written += disk.write_pieces(file, offset, pieces)?;
                    }
                    _ => {
                        disk.write(file, offset, from)?;
                        io.bytes_written += len as u64;
                    }
                }
            }
        }
        debug_assert!(!lanes.contains(&Lane::Values), "values have no work file; finishing packs them");
        debug_assert!(!lanes.contains(&Lane::Fresh), "fresh has no work file; the decision log holds it");
        Ok(())
    }

    /// Lays the `SparseWon` records of the sparse groups among `groups` of
    /// `target` over their holes in a loss step's landing slice (`words`,
    /// from lane byte `slice_start` on, with its block flags): a block
    /// with a record gets holes' words and its flag set, then its records.
    /// The records are read into this window's value buffer (free in a
    /// step until [`OwnBuffers::read_due`] reads the schedule's chunks
    /// into it; `due` holds the window's own records until they are laid
    /// out), in rounds of as many as fit.
    pub fn patch_landing_won(
        &mut self,
        disk: &mut DiskIo,
        target: &Work,
        groups: Range<usize>,
        (slice_start, words, blocks): (u64, &mut [u32], &mut PlacementFlags),
        io: &mut IoTotals,
    ) -> Result<(), SolveError> {
        let sparse: Vec<(usize, u32)> =
            groups.map(|g| (g, target.groups[g].sparse_layouts)).filter(|&(_, listed)| listed > 0).collect();
        let capacity = self.values.len();
        for round in rounds(&sparse, capacity) {
            let ranges = round.iter().map(|(_, bytes)| bytes.clone());
            let parts = carve_mut(self.values.bytes_mut(), ranges);
            let mut requests: Vec<ReadRequest> = round
                .iter()
                .zip(parts)
                .map(|(((g, _), bytes), into)| {
                    let start = target.planes.segment(*g).start;
                    (target.files().read_file(Lane::SparseWon, *g), start..start + bytes.len() as u64, into)
                })
                .collect();
            disk.read_many(&mut requests)?;
            for ((g, listed), bytes) in round {
                io.bytes_read += bytes.len() as u64;
                let records = &self.values.words()[bytes.start / 4..bytes.end / 4];
                let at = ((target.planes.segment(g).start - slice_start) / 4) as usize;
                let layouts = target.index.groups()[g].layouts as usize;
                let marker = blocks.marker(at);
                if sparse::patch_won(records, listed, &mut words[at..at + layouts], marker).is_err() {
                    let what = "sparse records out of order or beyond the group";
                    return Err(target.files().damaged(Lane::SparseWon, g, what).into());
                }
            }
        }
        Ok(())
    }

    /// The words of one plane lane's buffer.
    pub fn plane(&self, lane: Lane) -> &[u32] {
        let i = buffer_of(lane);
        self.planes[i].words()
    }

    /// The `capture` plane, the values and the `due` plane as bytes: what
    /// initialisation writes the capture schedule from, and the scratch it
    /// sorts it in (it has no due states).
    pub fn captures_and_scratch(&mut self) -> ((&[u32], &[u8]), &mut [u8]) {
        let i = buffer_of(Lane::Capture);
        ((self.planes[i].words(), self.values.bytes()), self.due.bytes_mut())
    }

    /// The `fresh` plane (where a streamed step leaves what it decided),
    /// the live flags (the placements whose `fresh` words are the batch's)
    /// and the value buffer (free once the step has run), to log the
    /// decisions.
    pub fn decided_and_scratch(&mut self) -> ((&[u32], &PlacementFlags), &mut [u8]) {
        let i = buffer_of(Lane::Fresh);
        ((self.planes[i].words(), &self.live), self.values.bytes_mut())
    }

    pub fn values(&self) -> &[u8] {
        self.values.bytes()
    }

    /// The value buffer.
    pub fn values_mut(&mut self) -> &mut [u8] {
        self.values.bytes_mut()
    }

    /// The window as the own lanes of a batch.
    pub fn own<'a>(&'a mut self, pm: &'a Packed, vm: &'a Packed) -> Own<'a> {
        let [won, lost, fresh, capture] = &mut self.planes[..] else { unreachable!("a window has four plane lanes") };
        Own {
            plane_map: pm,
            value_map: vm,
            won: won.words_mut(),
            lost: lost.words_mut(),
            fresh: fresh.words_mut(),
            capture: capture.words_mut(),
            values: self.values.bytes_mut(),
            width: self.width,
            due: self.due.words_mut(),
            next_event: &mut [],
            live: Some(&self.live),
        }
    }
}

/// A round of sparse groups' records read together: (group, records) and
/// the byte range of the buffer they are read into.
type RecordRound = Vec<((usize, u32), Range<usize>)>;

/// The due states a step's load fills ([`OwnBuffers::prepare`]): those
/// falling due at `depth_plies` in the groups `groups` names, from the
/// capture schedule.
pub(super) struct DueStates<'a> {
    pub schedule: &'a CaptureSchedule,
    pub depth_plies: u16,
    pub groups: &'a (dyn Fn(usize) -> bool + Sync),
}

/// One group's segments of a loaded window ([`OwnBuffers::prepare`]):
/// its padded plane segments (in [`WINDOW_LANES`] order) and `due`, the
/// element its segments start at, and its value segment if the schedule
/// is read.
struct GroupSegments<'a> {
    g: usize,
    first: usize,
    planes: [&'a mut [u32]; 4],
    due: &'a mut [u32],
    room: Option<&'a mut [u8]>,
    /// Was its `capture` segment read compacted?
    compacted: bool,
}

/// The bytes of a window's value buffer that group `g`, whose values the
/// window holds at `bytes`, may use as room (its padded value segment):
/// where a step reads the group's chunk of the capture schedule.
fn value_room(work: &Work, g: usize, bytes: &Range<usize>) -> Range<usize> {
    bytes.start..bytes.start + padded_len(&work.values, g) as usize
}

/// Tells the workers that the thread reading the next job has read it (or
/// ended without): they wait for it before they help lay it out.
#[derive(Default)]
pub(super) struct ReadSignal {
    read: Mutex<bool>,
    changed: Condvar,
}

impl ReadSignal {
    pub fn signal(&self) {
        *self.read.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.changed.notify_all();
    }

    /// Waits until [`ReadSignal::signal`].
    pub fn wait(&self) {
        let mut read = self.read.lock().unwrap_or_else(PoisonError::into_inner);
        while !*read {
            read = self.changed.wait(read).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Signals when dropped: however the reading thread ends, no one waits
    /// on.
    pub fn on_drop(&self) -> impl Drop + '_ {
        struct Signal<'a>(&'a ReadSignal);
        impl Drop for Signal<'_> {
            fn drop(&mut self) {
                self.0.signal();
            }
        }
        Signal(self)
    }
}

/// A loaded window's groups still to lay out ([`OwnBuffers::preparation`]).
pub(super) struct Preparation<'a> {
    /// The groups not taken yet, the largest last.
    groups: Mutex<Vec<GroupSegments<'a>>>,
    live: &'a PlacementFlags,
    /// The first error a group met.
    failed: Mutex<Option<SolveError>>,
}

impl Preparation<'_> {
    /// Lays out groups, one at a time, until none is left to take.
    pub fn help(&self, work: &Work, base: Option<&(dyn Fn(usize) -> Base + Sync)>, due: Option<&DueStates>) {
        let mut unpacker = None;
        loop {
            let Some(group) = self.groups.lock().unwrap_or_else(PoisonError::into_inner).pop() else { return };
            if let Err(error) = group.prepare(work, self.live, base, due.map(|due| (due, &mut unpacker))) {
                self.failed.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(error);
            }
        }
    }

    /// [`Preparation::help`] on every rayon worker, until none is left.
    pub fn help_on_workers(&self, work: &Work, base: Option<&(dyn Fn(usize) -> Base + Sync)>, due: Option<&DueStates>) {
        (0..rayon::current_num_threads()).into_par_iter().for_each(|_| self.help(work, base, due));
    }

    /// Once every group is laid out (every thread's [`Preparation::help`]
    /// has returned): the first error a group met, if any.
    pub fn finish(self) -> Result<(), SolveError> {
        debug_assert!(self.groups.lock().is_ok_and(|groups| groups.is_empty()), "every group laid out");
        self.failed.into_inner().unwrap_or_else(PoisonError::into_inner).map_or(Ok(()), Err)
    }
}

impl GroupSegments<'_> {
    /// [`OwnBuffers::prepare`] for this group.
    fn prepare(
        self,
        work: &Work,
        live: &PlacementFlags,
        base: Option<&(dyn Fn(usize) -> Base + Sync)>,
        due: Option<(&DueStates, &mut Option<Lent>)>,
    ) -> Result<(), SolveError> {
        let GroupSegments { g, first, planes: [won, lost, fresh, capture], due: due_words, room, compacted } = self;
        let layouts = work.index.groups()[g].layouts as usize;
        let padded = first..first + won.len();
        if let (Some(solved), true) = (&work.solved, compacted) {
            let origin = (work.planes.segment(g).start / 4) as usize;
            solved.expand(capture, origin, g, layouts);
        }
        if let Some(base) = base {
            let listed = work.groups[g].sparse_layouts;
            let base = if listed == 0 { Base::Dense } else { base(g) };
            live.put_segments(padded, base == Base::Dense);
            if listed > 0 {
                let (won_in, rest_in) = (&*due_words, &mut *fresh);
                let own = GroupWords {
                    won: &mut won[..layouts],
                    lost: &mut lost[..layouts],
                    capture: &mut capture[..layouts],
                };
                // `scatter` lays the placement's words itself.
                if sparse::scatter(won_in, rest_in, listed, own, base, |at| live.put_unshared(first + at, true))
                    .is_err()
                {
                    let what = "sparse records out of order or beyond the group";
                    return Err(work.files().damaged(Lane::SparseWon, g, what).into());
                }
                // Steps read `fresh` in the live placements only (and over
                // holes only those of the group's are live).
                match base {
                    Base::Holes { block_words } => {
                        sparse::clear_live(won_in, listed, block_words, &mut rest_in[..layouts])
                    }
                    Base::Dense => rest_in[..sparse::rest_bytes(listed) / 4].fill(0),
                }
            }
        }
        let Some((due, unpacker)) = due.filter(|(due, _)| (due.groups)(g)) else { return Ok(()) };
        let room = room.expect("value segments are carved where the schedule is read");
        assert!(room.len() >= CaptureSchedule::chunk_bound(layouts), "room for a chunk of the group");
        let (due_words, block_words) = (&mut due_words[..layouts], live.block_words());
        // Steps read `due` in the live placements only, so only those are
        // cleared (clearing whole segments took about a sixth of the
        // storing and reading thread's CPU samples at 4v4's depths 45-53,
        // docs/BENCHMARKS.md, session 35). The others keep what the buffer
        // held, and may get entries of layouts decided by now.
        for run in live.set_runs(first, layouts / block_words) {
            due_words[run.start * block_words..run.end * block_words].fill(0);
        }
        let unpacker = unpacker.get_or_insert_with(Unpacker::lend);
        due.schedule.unpack_due((g, due.depth_plies), layouts, room, unpacker, |n, states| {
            // At most one entry per layout and depth.
            debug_assert!(due_words[n] == 0 || !live.get(first + n - n % block_words));
            due_words[n] = states;
        })?;
        Ok(())
    }
}

/// Splits sparse groups (group, records) into rounds whose `SparseWon`
/// records fit `capacity` bytes.
fn rounds(groups: &[(usize, u32)], capacity: usize) -> Vec<RecordRound> {
    let mut out: Vec<RecordRound> = Vec::new();
    let mut at = 0;
    for &(g, listed) in groups {
        let bytes = sparse::won_bytes(listed);
        assert!(bytes <= capacity, "a group's records fit its plane segment, which fits a window");
        if out.is_empty() || at + bytes > capacity {
            out.push(Vec::new());
            at = 0;
        }
        out.last_mut().expect("pushed above").push(((g, listed), at..at + bytes));
        at += bytes;
    }
    out
}

/// A job's plane and value maps, where its landing slice was put (lane
/// byte offset, length) if it was planned, and the reads that fill them
/// (with the landing slice to fill from the log, if it comes from there).
pub(super) type PlannedJob<'a> =
    ((Packed, Packed), Option<(u64, usize)>, (Vec<ReadRequest<'a>>, Option<LandingFill<'a>>));

/// What loading a job does with a group's segment of a plane lane.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum PlaneLoad {
    /// Read from the work files.
    Read,
    /// Cleared: the kernels write it where they decide, or read it as
    /// zeros.
    Zeroed,
    /// Left as the window last held it: nothing in the job reads or stores
    /// it (a win step's dense `capture` where no event is due), so the
    /// storing and reading thread does not clear it.
    Left,
}

/// What to do with each plane lane, per group: `reads(lane, g)`.
pub(super) type PlaneReads<'a> = &'a (dyn Fn(Lane, usize) -> PlaneLoad + Sync);

/// What the batches ("jobs") of one streamed step read: their own lanes
/// (`lanes(lane, g)`) of `work`, and their landing slice of a lane laid
/// out as `landing`: from the mirror's decision log if `landing_log` is
/// given (`fresh`, for a win step), else group g from file `file_of(g)`,
/// except the groups `landing_holes` marks, which are filled as holes
/// (every card state set) and not read.
pub(super) struct StepReads<'w, F> {
    pub work: &'w Work,
    pub lanes: PlaneReads<'w>,
    pub values: ValueSegments,
    pub landing: &'w LaneLayout,
    pub landing_log: Option<&'w LandingChunks>,
    pub landing_holes: &'w [bool],
    pub file_of: F,
}

/// A landing slice to fill from the mirror's decision log: its groups, the
/// slice buffer's words for them, and the buffer's block flags with the
/// element of the buffer the words start at.
pub(super) struct LandingFill<'a> {
    groups: Range<usize>,
    words: &'a mut [u32],
    blocks: (&'a mut PlacementFlags, usize),
}

/// A slice buffer to read a landing slice into, and the flags of its
/// blocks that the kernels read (`StepInput::landing_blocks`): for a win
/// step those that may hold a `fresh` loss (set as the slice is filled
/// from the log), for a loss step those that may hold a state not won (the
/// groups read from disk, and the blocks of hole groups that sparse
/// records are laid over). Blocks whose flag is clear are not laid.
pub(super) type SliceBuffer<'a> = (&'a mut AlignedBuf, &'a mut PlacementFlags);

/// Reads a planned job: its reads, then its landing slice from the log if
/// it has one there.
pub(super) fn fetch(
    disk: &mut DiskIo,
    (requests, fill): (&mut [ReadRequest], Option<LandingFill>),
    reads: (&LaneLayout, Option<&LandingChunks>),
    io_bytes_read: &mut u64,
) -> Result<(), SolveError> {
    disk.read_many(requests)?;
    if let (Some(fill), (layout, Some(chunks))) = (fill, reads) {
        *io_bytes_read += chunks.fill(fill.groups, layout, fill.words, fill.blocks)?;
    }
    Ok(())
}

impl<F: Fn(usize) -> FileId> StepReads<'_, F> {
    /// Plans loading `batch` into `own`, and a part of a landing slice
    /// (of a range of the mirror's groups: the job's own, or a later job's
    /// read ahead) into its buffer if given (with its block flags if the
    /// slice comes from the log). Returns the maps, where the whole slice
    /// is put, and the reads.
    pub fn plan<'a>(
        &self,
        own: &'a mut OwnBuffers,
        slice: Option<(SliceBuffer<'a>, SlicePart)>,
        batch: &[usize],
        io: &mut IoTotals,
    ) -> PlannedJob<'a> {
        let (pm, vm, mut requests, zeros) = own.plan_load(self.work, batch, (self.lanes, self.values), io);
        // On the thread that stores and reads, while the workers compute:
        // here in turn, not on them.
        zeros.into_iter().for_each(|segment| segment.fill(0));
        let mut fill = None;
        let slice_at = slice.map(|((buffer, blocks), SlicePart { slice, part })| {
            if self.landing_log.is_some() {
                let span = self.landing.span(slice.clone());
                let len = (span.end - span.start) as usize;
                let words = self.landing.span(part.clone());
                let words = ((words.start - span.start) / 4) as usize..((words.end - span.start) / 4) as usize;
                let blocks = (blocks, words.start);
                fill = Some(LandingFill { groups: part, words: &mut buffer.words_mut()[words], blocks });
                return (span.start, len);
            }
            let holes = |g: usize| self.landing_holes[g];
            let buffer = (buffer, blocks);
            let (at, slice_requests) = plan_slice(buffer, &self.file_of, self.landing, (slice, part, &holes), io);
            requests.extend(slice_requests);
            at
        });
        ((pm, vm), slice_at, (requests, fill))
    }
}

/// A part of a landing slice: the slice's groups (a range of the mirror's
/// groups, which sets where each lands in the slice buffer) and those of
/// them to read now (a range within).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct SlicePart {
    pub slice: Range<usize>,
    pub part: Range<usize>,
}

impl SlicePart {
    /// All of `slice`.
    pub fn whole(slice: Range<usize>) -> SlicePart {
        SlicePart { part: slice.clone(), slice }
    }

    /// `slice` split into `count` parts of about equal bytes of `layout`
    /// (some empty, if it has fewer groups).
    pub fn split(slice: Range<usize>, layout: &LaneLayout, count: usize) -> Vec<SlicePart> {
        let bytes: Vec<u64> = slice.clone().map(|g| padded_len(layout, g)).collect();
        let first = slice.start;
        even_runs(&bytes, count)
            .into_iter()
            .map(|run| SlicePart { slice: slice.clone(), part: first + run.start..first + run.end })
            .collect()
    }
}

/// Plans reading the groups `part` of the groups `groups` of a plane lane
/// (one contiguous range; group g from file `file_of(g)`, one request per
/// run of groups in the same file) into `slice`, where `groups` start at
/// its first byte, but for the groups `hole(g)` marks: those read as
/// holes' words (every card state set) and are not read. Sets the block
/// flags of the groups read and clears those of the holes, whose words
/// are not laid (see [`SliceBuffer`]). Returns the lane byte offset the
/// buffer starts at, the byte length of `groups`, and the reads.
pub(super) fn plan_slice<'a>(
    (slice, blocks): SliceBuffer<'a>,
    file_of: impl Fn(usize) -> FileId,
    layout: &LaneLayout,
    (groups, part, hole): (Range<usize>, Range<usize>, &dyn Fn(usize) -> bool),
    io: &mut IoTotals,
) -> ((u64, usize), Vec<ReadRequest<'a>>) {
    if groups.is_empty() {
        return ((0, 0), Vec::new());
    }
    debug_assert!(groups.start <= part.start && part.end <= groups.end, "the part is of the slice");
    debug_assert_eq!(layout.bytes_per_layout(), 4, "holes are plane words");
    let span = layout.span(groups.clone());
    let len = (span.end - span.start) as usize;
    let relative = |bytes: Range<u64>| (bytes.start - span.start) as usize..(bytes.end - span.start) as usize;
    let mut runs: Vec<(FileId, Range<usize>)> = Vec::new();
    for g in part {
        let padded = relative(layout.span(g..g + 1));
        let elements = padded.start / 4..padded.end / 4;
        if hole(g) {
            blocks.clear_segments(elements.clone());
            // Debug builds fill holes with no card state set, which reads
            // as nothing won, so that a read past a clear flag fails the
            // tests.
            if cfg!(debug_assertions) {
                slice.words_mut()[elements].fill(0);
            }
            continue;
        }
        blocks.set_segments(elements);
        match runs.last_mut() {
            Some((file, run)) if *file == file_of(g) && run.end == g => run.end = g + 1,
            _ => runs.push((file_of(g), g..g + 1)),
        }
    }
    let ranges = runs.iter().map(|(_, run)| relative(layout.span(run.clone())));
    let parts = carve_mut(&mut slice.bytes_mut()[..len], ranges);
    let requests: Vec<ReadRequest> =
        runs.iter().zip(parts).map(|((file, run), into)| (*file, layout.span(run.clone()), into)).collect();
    io.bytes_read += requests.iter().map(|(_, bytes, _)| bytes.end - bytes.start).sum::<u64>();
    ((span.start, len), requests)
}

/// The smallest budget that streams every pair of a table (checked before
/// solving, so that a run is not refused half-way).
pub(super) fn minimum_budget(max_per_side: usize, io_block: u64) -> u64 {
    let mut minimum = 0;
    for material in Material::all_up_to(max_per_side) {
        if material.mover > material.opponent {
            continue;
        }
        let members =
            if material.mover == material.opponent { vec![material] } else { vec![material, material.flipped()] };
        let layouts: Vec<(MaterialIndex, LaneLayout, LaneLayout)> = members
            .iter()
            .map(|&m| {
                let index = MaterialIndex::new(m);
                let planes = LaneLayout::new(&index, 4);
                let values = LaneLayout::new(&index, CARD_STATES as u64);
                (index, planes, values)
            })
            .collect();
        let captured: Vec<(MaterialIndex, LaneLayout)> = members
            .iter()
            .filter(|m| m.opponent > 1)
            .map(|m| {
                let index = MaterialIndex::new(Material::new(m.opponent as usize - 1, m.mover as usize));
                let values = LaneLayout::new(&index, CARD_STATES as u64);
                (index, values)
            })
            .collect();
        let needs = lane_minimum(layouts.iter().map(|(i, p, v)| (i, p, v)), captured.iter().map(|(i, v)| (i, v)));
        minimum = minimum.max(needs.first_stage() + io_block * IO_BLOCKS as u64);
    }
    minimum
}

/// The smallest buffers a streamed pair can be solved in (bytes).
#[derive(Clone, Copy)]
pub(super) struct BufferNeeds {
    /// Largest padded plane segment of a group.
    pub plane: u64,
    /// Largest padded value segment of a group.
    pub value: u64,
    /// Largest landing slice (of a plane lane): what a step reads.
    pub landing_slice: u64,
    /// Largest captured slice (of a value lane): what initialisation reads.
    pub captured_slice: u64,
}

impl BufferNeeds {
    /// The first window and slice buffer: steps, initialisation, finishing.
    pub fn first_stage(&self) -> u64 {
        WINDOW_PLANES * self.plane + self.value + self.landing_slice.max(self.captured_slice)
    }

    /// The second window and slice buffer: steps only.
    pub fn second_stage(&self) -> u64 {
        WINDOW_PLANES * self.plane + self.value + self.landing_slice
    }
}

/// The buffers the given materials and their captured materials need.
fn lane_minimum<'a>(
    works: impl Iterator<Item = (&'a MaterialIndex, &'a LaneLayout, &'a LaneLayout)>,
    captured: impl Iterator<Item = (&'a MaterialIndex, &'a LaneLayout)>,
) -> BufferNeeds {
    let mut needs = BufferNeeds { plane: 0, value: 0, landing_slice: 0, captured_slice: 0 };
    for (index, planes, values) in works {
        for g in 0..index.groups().len() {
            needs.plane = needs.plane.max(padded_len(planes, g));
            needs.value = needs.value.max(padded_len(values, g));
        }
        for range in MoverSlices::new(index).all() {
            let span = planes.span(range.clone());
            needs.landing_slice = needs.landing_slice.max(span.end - span.start);
        }
    }
    for (index, values) in captured {
        for range in MoverSlices::new(index).all() {
            let span = values.span(range.clone());
            needs.captured_slice = needs.captured_slice.max(span.end - span.start);
        }
    }
    needs
}

/// Buffers a streamed pair needs with values of `width`, for the smallest
/// window that holds any one group. (Captured values are unpacked at the
/// pair's width.)
pub(super) fn streamed_minimum(
    works: &[Work],
    captured: &[Option<&FinishedMaterial>],
    width: ValueWidth,
) -> BufferNeeds {
    let values: Vec<LaneLayout> = works.iter().map(|w| w.values_at(width)).collect();
    let captured: Vec<(&MaterialIndex, LaneLayout)> =
        captured.iter().flatten().map(|c| (&c.index, super::value_layout(&c.index, width))).collect();
    lane_minimum(
        works.iter().zip(&values).map(|(w, v)| (&w.index, &w.planes, v)),
        captured.iter().map(|(i, v)| (*i, v)),
    )
}

/// Splits items of (plane, value) `sizes` into runs that fit `caps`, each
/// as long as it can be (the fewest runs).
fn greedy_batches(sizes: &[(u64, u64)], caps: (u64, u64)) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let (mut planes, mut values) = (0u64, 0u64);
    for (i, &(p, v)) in sizes.iter().enumerate() {
        match out.last_mut() {
            Some(last) if planes + p <= caps.0 && values + v <= caps.1 => last.end = i + 1,
            _ => {
                out.push(i..i + 1);
                (planes, values) = (0, 0);
            }
        }
        planes += p;
        values += v;
    }
    out
}

/// Splits items of (plane, value) `sizes` into `count` runs of about equal
/// plane bytes, or `None` if a run would not fit `caps` or be empty.
fn even_batches(sizes: &[(u64, u64)], caps: (u64, u64), count: usize) -> Option<Vec<Range<usize>>> {
    if count == 0 {
        return None;
    }
    let planes: Vec<u64> = sizes.iter().map(|s| s.0).collect();
    let runs = even_runs(&planes, count);
    let fits = |run: &Range<usize>| {
        let (p, v) = sizes[run.clone()].iter().fold((0, 0), |(p, v), s| (p + s.0, v + s.1));
        !run.is_empty() && p <= caps.0 && v <= caps.1
    };
    runs.iter().all(fits).then_some(runs)
}

/// Splits items of `sizes` into `count` (at least one) runs that follow
/// each other, of about equal total size: an item goes to the run its
/// middle falls in, so a run is off its share by at most one item. Runs
/// may be empty.
fn even_runs(sizes: &[u64], count: usize) -> Vec<Range<usize>> {
    assert!(count > 0, "at least one run");
    let total: u64 = sizes.iter().sum();
    let mut ends = vec![0usize; count];
    let mut before = 0u64;
    for (i, &size) in sizes.iter().enumerate() {
        let middle = u128::from(before) * 2 + u128::from(size);
        let run = if total == 0 { 0 } else { (middle * count as u128 / (u128::from(total) * 2)) as usize };
        ends[run.min(count - 1)] = i + 1;
        before += size;
    }
    let mut start = 0;
    ends.into_iter()
        .map(|end| {
            let run = start..end.max(start);
            start = run.end;
            run
        })
        .collect()
}

/// Bytes a group's segment takes with its padding.
/// Is every byte of `bytes` zero? (OR-folded in chunks, which the compiler
/// vectorises: segments are megabytes.)
fn is_zero(bytes: &[u8]) -> bool {
    bytes.chunks(64).all(|chunk| chunk.iter().fold(0, |any, &b| any | b) == 0)
}

pub(super) fn padded_len(layout: &LaneLayout, g: usize) -> u64 {
    let span = layout.span(g..g + 1);
    span.end - span.start
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockio::IoChoice;
    use crate::solver::disk::LaneFile;
    use std::os::unix::fs::FileExt;

    /// Batches cover the groups in order, each fits the window, there are
    /// as few as greedy packing makes (or one more), and no batch is much
    /// smaller than the others, where greedy packing leaves a small last
    /// one.
    #[test]
    fn batches_are_few_and_even() {
        let mut state = 12345u64;
        let mut next = |limit: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % limit + 1
        };
        for _ in 0..500 {
            let items = next(60) as usize;
            let sizes: Vec<(u64, u64)> = (0..items).map(|_| (next(100), next(100))).collect();
            let caps = (100 + next(400), 100 + next(400));
            let greedy = greedy_batches(&sizes, caps);
            let even = (greedy.len()..=greedy.len() + 1).find_map(|count| even_batches(&sizes, caps, count));
            for runs in [Some(&greedy), even.as_ref()].into_iter().flatten() {
                let covered: Vec<usize> = runs.iter().flat_map(|r| r.clone()).collect();
                assert_eq!(covered, (0..items).collect::<Vec<_>>());
                for run in runs {
                    let (p, v) = sizes[run.clone()].iter().fold((0, 0), |(p, v), s| (p + s.0, v + s.1));
                    assert!(!run.is_empty() && p <= caps.0 && v <= caps.1);
                }
            }
            let Some(even) = even else { continue };
            assert!(even.len() <= greedy.len() + 1);
            // Each run holds its share of the planes, within one item.
            let total: u64 = sizes.iter().map(|s| s.0).sum();
            for run in &even {
                let p: u64 = sizes[run.clone()].iter().map(|s| s.0).sum();
                assert!(p + 2 * 100 >= total / even.len() as u64, "{p} of {total} in {} runs", even.len());
            }
        }
        // Greedy packing of ten equal groups, four to a window, leaves two
        // in the last batch; even batches hold three or four.
        let sizes = [(1, 1); 10];
        assert_eq!(greedy_batches(&sizes, (4, 4)), vec![0..4, 4..8, 8..10]);
        let even = even_batches(&sizes, (4, 4), 3).unwrap();
        assert!(even.iter().all(|run| run.len() >= 3), "{even:?}");
    }

    /// A slice's parts cover its groups in order, as many as asked, each
    /// within a group's bytes of its share.
    #[test]
    fn slice_parts_cover_the_slice_in_even_shares() {
        let index = MaterialIndex::new(Material::new(3, 3));
        let layout = LaneLayout::new(&index, 4);
        let groups = index.groups().len();
        let largest = (0..groups).map(|g| padded_len(&layout, g)).max().unwrap();
        for (slice, count) in [(0..groups, 1), (0..groups, 7), (3..groups / 2, 4), (5..7, 5), (9..10, 3)] {
            let parts = SlicePart::split(slice.clone(), &layout, count);
            assert_eq!(parts.len(), count);
            let mut at = slice.start;
            let span = layout.span(slice.clone());
            let share = (span.end - span.start) / count as u64;
            for part in &parts {
                assert_eq!(part.slice, slice);
                assert_eq!(part.part.start, at, "parts follow each other");
                at = part.part.end;
                let bytes = layout.span(part.part.clone());
                assert!((bytes.end - bytes.start).abs_diff(share) <= largest, "{part:?}: a share of {share}");
            }
            assert_eq!(at, slice.end, "the parts cover the slice");
        }
        assert_eq!(SlicePart::whole(2..5), SlicePart { slice: 2..5, part: 2..5 });
    }

    /// A landing slice read with holes: the groups marked cost no read and
    /// their block flags are cleared, the others come from their slot's
    /// file with their flags set, and runs of groups split at holes and at
    /// file changes.
    #[test]
    fn landing_slices_skip_and_fill_hole_groups() {
        let index = MaterialIndex::new(Material::new(2, 3));
        let layout = LaneLayout::new(&index, 4);
        let groups = index.groups().len();
        let dir = tempfile::tempdir().unwrap();
        let mut disk = DiskIo::new(IoChoice::Pread, 64 * 1024, 4).unwrap();
        // Slot file s holds word (s << 24 | element) at every element.
        let files: Vec<FileId> = (0..2u32)
            .map(|slot| {
                let path = dir.path().join(format!("lane.{slot}"));
                let lane = LaneFile::open(&path, true, layout.total_bytes()).unwrap();
                let words: Vec<u8> =
                    (0..layout.total_bytes() as u32 / 4).flat_map(|e| (slot << 24 | e).to_le_bytes()).collect();
                std::fs::OpenOptions::new().write(true).open(&path).unwrap().write_all_at(&words, 0).unwrap();
                disk.open(&lane).unwrap()
            })
            .collect();
        let slot_of = |g: usize| (g / 3) % 2;
        let hole = |g: usize| g % 5 == 1 || g.is_multiple_of(7);
        let range = 2..groups - 1;
        let mut slice = AlignedBuf::zeroed(layout.total_bytes() as usize).unwrap();
        let block_words = 6;
        let mut blocks = PlacementFlags::all_set(slice.len() / 4, block_words);
        // Stale flags before the slice: set, and some clear in it.
        let first = (layout.segment(range.start).start / 4) as usize;
        blocks.clear_segments(first..first + 1024);
        let mut io = IoTotals::default();
        let buffer = (&mut slice, &mut blocks);
        let ((start, len), mut requests) =
            plan_slice(buffer, |g| files[slot_of(g)], &layout, (range.clone(), range.clone(), &hole), &mut io);
        assert_eq!(start, layout.segment(range.start).start);
        assert_eq!(len as u64, layout.span(range.clone()).end - start);
        let read: u64 =
            range.clone().filter(|&g| !hole(g)).map(|g| layout.span(g..g + 1)).map(|s| s.end - s.start).sum();
        assert_eq!(io.bytes_read, read);
        disk.read_many(&mut requests).unwrap();
        drop(requests);
        for g in range {
            let segment = layout.segment(g);
            let words = &slice.words()[((segment.start - start) / 4) as usize..((segment.end - start) / 4) as usize];
            for n in (0..words.len()).step_by(block_words) {
                let element = ((segment.start - start) / 4) as usize + n;
                assert_eq!(blocks.get(element), !hole(g), "group {g}, block at {n}");
            }
            if hole(g) {
                continue;
            }
            for (n, &word) in words.iter().enumerate() {
                let element = (segment.start / 4) as u32 + n as u32;
                assert_eq!(word, (slot_of(g) as u32) << 24 | element, "group {g}, layout {n}");
            }
        }
    }
}

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
//! Each layout has four 30-bit words (one bit per card state) and 30 value
//! bytes, kept in [`lanes`]: `won`, `lost`, `fresh` (lost in the last loss
//! step) and `capture` (the best capture, whose value is in the value
//! byte, still bounds the state: a win not yet due, a draw, a loss deeper
//! than the last loss step). An undecided state's value byte holds the best
//! value reachable by captures alone (0 if there is none).
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

mod capture_schedule;
mod capture_values;
mod checkpoint;
mod compact;
mod crossing;
mod decision_log;
pub mod disk;
mod entries;
/// The work files' entry codec, for `tools/entry_codec.rs` to measure
/// (the frames around it stay private).
#[doc(hidden)]
pub use entries::{STORED_SLACK_BYTES, entries_to_stored, stored_to_entries, visit_stored};
mod finish;
mod finished;
pub use finished::{FinishedMaterial, UNPACK_BATCH_BYTES_DEFAULT};
use finished::{FinishedValues, open_finished};
mod flags;
mod kernel;
pub mod lanes;
mod layout_bytes;
mod mirror;
mod move_lists;
mod packed_values;
mod schedule;
mod sparse;
mod step;
use step::{EncodedParts, deciding_groups, encode_group, fits_encoded, log_decisions, settled_groups};
mod unpacked_groups;
mod window;
mod work_files;
pub use work_files::{WORK_DISK_BYTES_PER_LAYOUT, WorkDiskOutlook, work_disk_outlook};

use crate::blockio::{IoBackendKind, IoChoice};
use crate::index::{Material, MaterialIndex};
use crate::rules::{ALL_CARD_STATES, CARD_STATES, MAX_PIECES_PER_SIDE, Rules};
use crate::table::Table;
use crate::value::{MAX_LOSS_PLIES, Value, ValueWidth};
pub use checkpoint::PairTime;
use checkpoint::{Checkpoint, PairRecord, WorkRecord};
use compact::SolvedPlacements;
use decision_log::LogMark;
use disk::{AlignedBuf, DiskError, DiskIo};
use flags::{GroupFlags, PlacementFlags, SideFlags};
use kernel::{EventDepths, Landing, MoveTable, ROWS, StepInput, StepValues, Unit, UnitReport};
use lanes::{Lane, LaneLayout, ResidentLanes, SEGMENT_ALIGN_BYTES, SegmentMap, Span, carve_mut};
use mirror::Mirror;
use move_lists::{CountedMoves, MoveLists};
use packed_values::{PackedValues, PackedWriter, Readers};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use thiserror::Error;
use unpacked_groups::UnpackedGroups;
use window::{OwnBuffers, Packed, PlaneLoad, ValueSegments, WINDOW_PLANES, Window, minimum_budget, streamed_minimum};
use work_files::MaterialFiles;

/// Placements per unit of parallel work: big enough to amortise scheduling,
/// small enough to balance two to many cores.
const UNIT_PLACEMENTS: u64 = 512;

#[derive(Debug, Error)]
pub enum SolveError {
    #[error("table size must be 1..={MAX_PIECES_PER_SIDE} pieces per side, got {0}")]
    Size(usize),
    #[error(
        "material {material} needs a loss deeper than {MAX_LOSS_PLIES} plies, which one-byte values cannot hold, and this budget cannot hold it with two-byte values; a budget (--mem) of at least {} ({needed_budget_bytes} bytes) can (README: Limits)",
        crate::blockio::format_size(*needed_budget_bytes)
    )]
    TooDeep { material: Material, needed_budget_bytes: u64 },
    #[error(
        "a memory budget of {} cannot hold the largest group of this table with its landing slice; the minimum is {} ({minimum_bytes} bytes)",
        crate::blockio::format_size(*budget_bytes),
        crate::blockio::format_size(*minimum_bytes)
    )]
    BudgetTooSmall { budget_bytes: u64, minimum_bytes: u64 },
    #[error("the checkpoint's record of material {0} does not fit its index; the work directory is damaged")]
    DamagedCheckpoint(Material),
    #[error(transparent)]
    Disk(#[from] DiskError),
    #[error(transparent)]
    Checkpoint(#[from] checkpoint::CheckpointError),
}

/// What a pair does when its steps pass what a value byte holds.
#[derive(Clone, Copy)]
enum Widening<'a> {
    /// Goes on in words (`Work::widen_values`): resident, first dropping
    /// its kept move lists if the budget holds its lanes in words only
    /// without them; streamed, in its window, or in one made again for
    /// words by `window` (the byte window's memory freed first) if its own
    /// value buffer cannot hold a group's words, which finishing loads
    /// whole. (As each material is finished, values in words that all fit
    /// a byte are narrowed back: `finish`.)
    InPlace { drop_move_lists: bool, window: Option<&'a WindowMaker<'a>> },
    /// Stops with `SolveError::TooDeep`: a run that asked for bytes, a
    /// resident pair whose budget cannot hold its lanes in words, or a
    /// streamed one whose budget cannot hold its window in words. A budget
    /// of `needed_budget_bytes` would do.
    Refused { needed_budget_bytes: u64 },
}

/// A pair as the solver plans to solve it, before it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairPlan {
    pub materials: [Material; 2],
    pub layouts: u64,
    /// Will it be streamed through the work directory (its lanes do not fit
    /// the budget), or solved in memory?
    pub streamed: bool,
}

/// What the solver reports as it goes.
#[derive(Clone, Debug)]
pub enum Progress {
    /// Once, first: the pairs left to solve (those an earlier run finished
    /// are not counted), in the order they will be solved.
    RunStarted {
        pairs: Vec<PairPlan>,
        /// How long the pairs an earlier run finished took, in solving
        /// order (from its checkpoint; empty for a fresh run).
        earlier: Vec<PairTime>,
    },
    /// A pair needs a loss deeper than a value byte holds: it goes on
    /// from there with value words, and so do the pairs whose captures
    /// lead to it.
    Widened {
        material: Material,
    },
    MaterialStarted {
        materials: [Material; 2],
        layouts: u64,
        streamed: bool,
        /// The step an earlier run's checkpoint got this pair to (0:
        /// initialised), if it goes on from there.
        resumed_at_plies: Option<u16>,
        /// Time earlier runs spent on the pair up to that checkpoint.
        spent_before: Duration,
    },
    /// A step of the pair in progress ended (depth 0: its initialisation,
    /// which visits every group): states decided so far, groups the step
    /// visited (of all of the pair's), groups whose own planes are sparse
    /// now (streamed pairs, `sparse`), work-file I/O of the pair so far,
    /// and where the step's time went (streamed pairs).
    Step {
        depth_plies: u16,
        decided: u64,
        groups_visited: u64,
        groups: u64,
        groups_sparse: u64,
        io: IoTotals,
        times: StepTimes,
    },
    /// A batch of a streamed step is done: `done` of the step's `batches`
    /// for `material`, and the pair's work-file I/O so far.
    Batch {
        depth_plies: u16,
        material: Material,
        done: usize,
        batches: usize,
        io: IoTotals,
    },
    /// A batch of a streamed material's finishing (its value bytes made
    /// from the planes and the log, and packed) is done: `done` of
    /// `batches`, and the pair's work-file I/O so far.
    Finishing {
        material: Material,
        done: usize,
        batches: usize,
        io: IoTotals,
    },
    MaterialDone {
        materials: [Material; 2],
    },
    /// Materials finished by an earlier run, taken from its checkpoint.
    MaterialResumed {
        materials: [Material; 2],
    },
    /// The I/O back end streamed pairs use, once, before the first one;
    /// `fallback` says why io_uring was not used when it was asked for.
    IoBackend {
        backend: IoBackendKind,
        fallback: Option<String>,
    },
}

/// Where the solver keeps its work.
#[derive(Clone, Debug)]
pub struct SolveConfig {
    /// Work directory for lanes that do not fit the budget and for the
    /// checkpoint. None: everything stays in memory.
    pub work_dir: Option<PathBuf>,
    /// Bytes of lane memory the solver may use (None: unlimited). Fixed
    /// overheads (indexes, flags, threads) come on top; see DESIGN.md.
    pub budget_bytes: Option<u64>,
    /// Continue from the checkpoint in the work directory.
    pub resume: bool,
    /// Solve every pair streamed, even if it would fit in memory (tests).
    pub force_streamed: bool,
    /// I/O back end for streamed pairs.
    pub io: IoChoice,
    /// Least time between checkpoints of a streamed pair (zero: after every
    /// step). Each costs a sync of the pair's work files.
    pub checkpoint_every: Duration,
    /// Steps of a mirror-closed card set solve one placement of each
    /// mirror pair (`mirror`); false solves every placement (tests compare
    /// the two). The tables are the same.
    pub mirror: bool,
    /// Bytes of the budget a streamed pair's windows leave unused when
    /// they can (out of what the budget holds beyond their fixed parts),
    /// for the caller's own buffers beside the solve: a shard writer.
    pub reserved_bytes: u64,
    /// Bytes per value. None: the solver chooses: bytes, and words for a
    /// pair from where it needs a loss deeper than a byte holds
    /// (`Progress::Widened`) and for the pairs whose captures lead to it;
    /// words that fit are narrowed as each material is finished (`Widening`).
    /// Some: that width throughout.
    pub value_width: Option<ValueWidth>,
}

/// A minute: a `kill -9` loses at most about that much work, and the syncs
/// cost next to nothing against steps of that length.
pub const CHECKPOINT_EVERY_DEFAULT: Duration = Duration::from_secs(60);

impl Default for SolveConfig {
    fn default() -> SolveConfig {
        SolveConfig {
            work_dir: None,
            budget_bytes: None,
            resume: false,
            force_streamed: false,
            io: IoChoice::default(),
            checkpoint_every: CHECKPOINT_EVERY_DEFAULT,
            mirror: true,
            reserved_bytes: 0,
            value_width: None,
        }
    }
}

/// Where a streamed step's wall time went, summed over its jobs: what
/// the workers did, and how long the thread that stores and reads was busy
/// (with two windows it works while the workers compute; with one, in
/// turn). Zero for resident steps.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepTimes {
    /// The step kernels, and the encoding of the decisions of units that
    /// are whole groups (`ValueMode::Logged`).
    pub computing: Duration,
    /// Settling jobs: encoding the other groups' decisions and appending
    /// all to the log, finding the groups that turn sparse or relist,
    /// gathering records to store.
    pub settling: Duration,
    /// The workers idle, waiting for jobs to be stored and read.
    pub waiting_for_io: Duration,
    /// Storing jobs and reading (and unpacking) the next ones.
    pub storing_and_reading: Duration,
    /// CPU time of the whole process (every thread) during `computing`,
    /// `settling` and `waiting_for_io`: over the wall time, how many of the
    /// cores were busy in each (with two windows; zero with one).
    pub computing_cpu: Duration,
    pub settling_cpu: Duration,
    pub waiting_cpu: Duration,
    /// CPU time of the thread that stores and reads, while it did: the
    /// rest of `storing_and_reading` it waited for the disk.
    pub storing_and_reading_cpu: Duration,
}

/// CPU time that the whole process (`libc::CLOCK_PROCESS_CPUTIME_ID`) or
/// the calling thread (`CLOCK_THREAD_CPUTIME_ID`) has used so far.
fn cpu_time(clock: libc::clockid_t) -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill; both clocks
    // exist on every Linux this runs on, and on failure `now` stays zero
    // (callers subtract saturating, so a failed reading gives no time).
    unsafe { libc::clock_gettime(clock, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

impl StepTimes {
    /// Time since `started` spent storing and reading while the workers
    /// waited for it (one window, or the ends of a step).
    fn io_in_turn(&mut self, started: Instant) {
        let spent = started.elapsed();
        self.waiting_for_io += spent;
        self.storing_and_reading += spent;
    }
}

impl std::ops::AddAssign for StepTimes {
    fn add_assign(&mut self, other: StepTimes) {
        self.computing += other.computing;
        self.settling += other.settling;
        self.waiting_for_io += other.waiting_for_io;
        self.storing_and_reading += other.storing_and_reading;
        self.computing_cpu += other.computing_cpu;
        self.settling_cpu += other.settling_cpu;
        self.waiting_cpu += other.waiting_cpu;
        self.storing_and_reading_cpu += other.storing_and_reading_cpu;
    }
}

/// I/O done by a solve.
#[derive(Clone, Copy, Debug, Default)]
pub struct IoTotals {
    pub bytes_read: u64,
    pub bytes_written: u64,
}

/// What the solver keeps per group between steps.
#[derive(Clone, Copy, Debug)]
struct GroupState {
    /// Card states not decided yet.
    undecided: u64,
    /// Depths at which a capture value makes a state due.
    events: EventDepths,
    /// Streamed: layouts listed in the group's sparse lanes, 0 while its
    /// own planes are dense (`sparse`).
    sparse_layouts: u32,
}

/// Where a material's lanes are.
enum Storage {
    Resident(ResidentLanes),
    OnDisk(Box<MaterialFiles>),
}

/// Working state of one material while it is solved.
struct Work {
    index: MaterialIndex,
    /// Layout of the five plane lanes (4 bytes per layout).
    planes: LaneLayout,
    /// Layout of the value lane (30 values per layout).
    values: LaneLayout,
    /// Bytes per value: words only in resident pairs (`solve_with`).
    width: ValueWidth,
    storage: Storage,
    sides: SideFlags,
    changed: GroupFlags,
    groups: Vec<GroupState>,
    /// Resident materials whose lists fit the budget: every placement's
    /// quiet moves, kept from step to step.
    kept: Option<MoveLists>,
    /// With kept lists: which placements may hold a `fresh` loss, so that
    /// the mirror's win steps read only those blocks.
    fresh_placements: Option<PlacementFlags>,
    /// A mirror-closed set: the placements steps solve (not the images of
    /// earlier ones, see `mirror`). Resident steps walk only those;
    /// streamed pairs store their `capture` compacted to them
    /// (`compact`).
    solved: Option<SolvedPlacements>,
    /// Resident: the placements the steps walk, a flag per placement
    /// numbered by its first plane element: the solved ones (every one
    /// without a mirror), each until a loss step finds all its states
    /// decided and drops it (`kernel::LossLanes::drop_decided`). Two
    /// thirds of the 6-men visits found every state decided before
    /// (95.9 M of 145.9 M, counted once). Set when the steps begin.
    open: Option<PlacementFlags>,
    /// Streamed: the groups whose layouts outside their sparse records
    /// (all layouts, if dense) were all decided before the steps of the
    /// current depth began, so a loss step of the mirror reads holes there
    /// instead of their dense `won` (`settled_groups`).
    landing_holes: Vec<bool>,
    /// Who reads the material's values back once they are packed
    /// ([`value_readers`]).
    readers: Readers,
}

/// Where a streamed material's files are, and the checkpoint record of its
/// state to resume from (None: start the pair afresh).
struct StreamedIn<'a> {
    dir: &'a Path,
    disk: &'a mut DiskIo,
    resume: Option<&'a WorkRecord>,
}

impl Work {
    fn new(
        index: MaterialIndex,
        streamed_in: Option<StreamedIn>,
        width: ValueWidth,
        readers: Readers,
    ) -> Result<Work, SolveError> {
        let material = index.material;
        let planes = LaneLayout::new(&index, 4);
        let values = value_layout(&index, width);
        let count = index.groups().len();
        let mut groups = vec![GroupState { undecided: 0, events: EventDepths::default(), sparse_layouts: 0 }; count];
        let storage = match streamed_in {
            None => Storage::Resident(ResidentLanes::new(&planes, &values)),
            Some(StreamedIn { dir, disk, resume: None }) => {
                Storage::OnDisk(Box::new(MaterialFiles::create(dir, material, &planes, count, disk)?))
            }
            Some(StreamedIn { dir, disk, resume: Some(record) }) => {
                let damaged = || SolveError::DamagedCheckpoint(material);
                let slots = record.decode_slots(count).ok_or_else(damaged)?;
                let lens =
                    [record.undecided.len(), record.events.len(), record.events_beyond.len(), record.sparse.len()];
                if lens.iter().any(|&len| len != count) {
                    return Err(damaged());
                }
                for (g, state) in groups.iter_mut().enumerate() {
                    let sparse_layouts = record.sparse[g];
                    if !sparse::fits(sparse_layouts, window::padded_len(&planes, g)) {
                        return Err(damaged());
                    }
                    *state = GroupState {
                        undecided: record.undecided[g],
                        events: EventDepths::from_record(record.events[g], record.events_beyond[g])
                            .ok_or_else(damaged)?,
                        sparse_layouts,
                    };
                }
                let mark = LogMark { bytes: record.log_bytes, segments: record.log_steps.clone() };
                Storage::OnDisk(Box::new(MaterialFiles::reopen(dir, material, &planes, slots, mark, disk)?))
            }
        };
        Ok(Work {
            sides: SideFlags::new(material.mover as usize),
            changed: GroupFlags::new(index.groups().len()),
            index,
            planes,
            values,
            width,
            storage,
            groups,
            kept: None,
            fresh_placements: None,
            solved: None,
            open: None,
            landing_holes: Vec::new(),
            readers,
        })
    }

    fn files(&self) -> &MaterialFiles {
        match &self.storage {
            Storage::OnDisk(files) => files,
            Storage::Resident(_) => unreachable!("only streamed materials have files"),
        }
    }

    /// Syncs the work files and describes the material's state for a
    /// checkpoint; also returns the slot bytes to keep once it is durable.
    fn checkpoint_record(&self, disk: &mut DiskIo) -> Result<(WorkRecord, Vec<u8>), SolveError> {
        let (slots, log) = self.files().sync(disk)?;
        let record = WorkRecord {
            undecided: self.groups.iter().map(|g| g.undecided).collect(),
            events: self.groups.iter().map(|g| g.events.to_record().0).collect(),
            events_beyond: self.groups.iter().map(|g| g.events.to_record().1).collect(),
            sparse: self.groups.iter().map(|g| g.sparse_layouts).collect(),
            slots: WorkRecord::encode_slots(&slots),
            log_bytes: log.bytes,
            log_steps: log.segments,
        };
        Ok((record, slots))
    }

    /// What a [`PlacementFlags`] of the material's placements is made
    /// with: its plane lanes' elements and the words of a placement.
    fn placement_flags_shape(&self) -> (usize, usize) {
        let per_placement = self.index.material.mover as usize * self.index.material.opponent as usize;
        ((self.planes.total_bytes() / 4) as usize, per_placement)
    }

    /// The material's values as value words from now on (a pair that
    /// needs a loss deeper than a byte holds goes on in words where it
    /// stands: every value decided so far, and every capture value folded
    /// in, fits a byte and is the same in a word). Resident, the value lane
    /// is widened; `next_event` stays: a byte's events end before
    /// [`kernel`]'s deep-event mark. Streamed, there is no value lane
    /// during the steps (the capture schedule and the decision log hold
    /// depths, not values), so only finishing sees the new width.
    fn widen_values(&mut self) {
        assert_eq!(self.width, ValueWidth::Byte, "widened once");
        let words = self.values_at(ValueWidth::Word);
        if let Storage::Resident(lanes) = &mut self.storage {
            widen_in_place(&mut lanes.values, &self.values, &words);
        }
        (self.values, self.width) = (words, ValueWidth::Word);
    }

    /// The layout of the material's value lane at `width`.
    fn values_at(&self, width: ValueWidth) -> LaneLayout {
        value_layout(&self.index, width)
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

/// The layout of a material's value lane with values of `width` (30 of them
/// a layout).
pub(super) fn value_layout(index: &MaterialIndex, width: ValueWidth) -> LaneLayout {
    LaneLayout::new(index, (CARD_STATES * width.bytes()) as u64)
}

/// A value lane laid out again at `width`: every group segment of `from`
/// (laid out by `layout`) handed to `relay(from, to)` with the group's
/// segment of a new lane, groups in parallel; None if `relay` refuses one.
fn relaid_values(
    index: &MaterialIndex,
    layout: &LaneLayout,
    from: &[u8],
    width: ValueWidth,
    relay: impl Fn(&[u8], &mut [u8]) -> bool + Sync,
) -> Option<(LaneLayout, Vec<u8>)> {
    let to_layout = value_layout(index, width);
    let mut to = vec![0u8; to_layout.total_bytes() as usize];
    let range = |segment: Range<u64>| segment.start as usize..segment.end as usize;
    let groups = 0..index.groups().len();
    let fits = carve_mut(&mut to, groups.clone().map(|g| range(to_layout.segment(g))))
        .into_par_iter()
        .zip(groups.into_par_iter())
        .all(|(to, g)| relay(&from[range(layout.segment(g))], to));
    fits.then_some((to_layout, to))
}

/// Value bytes for value words, a lane segment at a time; false if one
/// does not fit a byte.
fn narrow_segment(words: &[u8], bytes: &mut [u8]) -> bool {
    (bytes.iter_mut().enumerate())
        .all(|(k, byte)| crate::value::narrow(crate::value::word_at(words, k)).map(|narrow| *byte = narrow).is_some())
}

/// Widens a value lane laid out by `bytes` into the value words of the
/// layout `words`, in the same vector: it grows (in place, for a mapping
/// as large as a lane), and the bytes are widened from the last to the
/// first. So the memory is the word lane's, not both lanes'. (A word never
/// lands on a byte not yet read: group g's words start at or after its
/// bytes, since each segment before it is at least as long, and a byte k
/// places of a segment in moves to 2k places in.)
fn widen_in_place(values: &mut Vec<u8>, bytes: &LaneLayout, words: &LaneLayout) {
    assert_eq!(values.len() as u64, bytes.total_bytes(), "a whole lane");
    values.resize(words.total_bytes() as usize, 0);
    for g in (0..bytes.groups()).rev() {
        let (from, to) = (bytes.segment(g), words.segment(g));
        widen_within(values, from.start as usize, to.start as usize, (from.end - from.start) as usize);
        // The padding after the segment held bytes of other groups.
        let padded = words.span(g..g + 1).end as usize;
        values[to.end as usize..padded].fill(0);
    }
}

/// Widens the `len` value bytes at `from` of `values` into the value words
/// at `to` (no earlier), the last first, so that no word lands on a byte
/// not yet read.
fn widen_within(values: &mut [u8], from: usize, to: usize, len: usize) {
    assert!(to >= from, "words never overtake the bytes still to read");
    for k in (0..len).rev() {
        let word = crate::value::widen(values[from + k]);
        values[to + 2 * k..to + 2 * k + 2].copy_from_slice(&word.to_le_bytes());
    }
}

/// Value words for value bytes, a lane segment at a time.
fn widen_segment(bytes: &[u8], words: &mut [u8]) {
    for (k, &byte) in bytes.iter().enumerate() {
        crate::value::set_word_at(words, k, crate::value::widen(byte));
    }
}

/// Every material of a table, solved.
pub struct Solved {
    pub rules: Rules,
    pub max_per_side: usize,
    pub materials: Vec<FinishedMaterial>,
    pub io: IoTotals,
    /// Pairs solved streamed (the others were resident).
    pub streamed_pairs: usize,
    /// Pairs (a material and its mirror) solved or resumed.
    pub pairs: usize,
    /// The lock on the work directory, which holds the streamed
    /// materials' packed values: no other run may start there while they
    /// are read.
    _work_lock: Option<checkpoint::WorkLock>,
}

impl Solved {
    /// The table in memory (reads the work files of streamed materials).
    pub fn into_table(self) -> Result<Table, SolveError> {
        let materials = self.materials.into_iter().map(FinishedMaterial::into_solved).collect::<Result<_, _>>()?;
        Ok(Table::new(self.rules, self.max_per_side, materials))
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

/// A unit of work: (group number, first placement, end placement).
type UnitSpec = (usize, u64, u64);

/// Units of work over the given groups.
fn units_of(index: &MaterialIndex, groups: &[usize]) -> Vec<UnitSpec> {
    parts_of(index, groups, UNIT_PLACEMENTS)
}

/// The given groups in units of `part_placements` placements, the last
/// unit of each group taking the rest.
fn parts_of(index: &MaterialIndex, groups: &[usize], part_placements: u64) -> Vec<UnitSpec> {
    let per_placement = (index.material.mover as u64) * (index.material.opponent as u64);
    let mut units = Vec::new();
    for &g in groups {
        let placements = index.groups()[g].layouts / per_placement;
        let mut start = 0;
        while start < placements {
            let end = (start + part_placements).min(placements);
            units.push((g, start, end));
            start = end;
        }
    }
    units
}

/// Units of work that are the given groups, whole.
fn whole_groups(index: &MaterialIndex, groups: &[usize]) -> Vec<UnitSpec> {
    let per_placement = (index.material.mover as u64) * (index.material.opponent as u64);
    groups.iter().map(|&g| (g, 0, index.groups()[g].layouts / per_placement)).collect()
}

/// A step's (or initialisation's) units over the given groups: whole
/// groups if it mirrors, since a placement's image, whose words it
/// writes, lies in the same group (the mirror keeps every row's counts).
fn step_units(moves: &MoveTable, index: &MaterialIndex, groups: &[usize]) -> Vec<UnitSpec> {
    if moves.mirror.is_some() { whole_groups(index, groups) } else { units_of(index, groups) }
}

/// A streamed mirroring step solves a job's group in parts, in parallel,
/// if it holds more than 1 / (this times the workers) of the job's layouts:
/// with two workers, a quarter. Whole, a job's largest group ran for about
/// half of its kernels' time at 8 men, the other worker idle at the end
/// (docs/BENCHMARKS.md, sessions 47 and 53).
#[cfg(not(test))]
const FAN_OUT_SHARE: u64 = 2;
/// Unit tests solve every group of more than one part in parts, of a few
/// placements, so that a small table's groups have several.
#[cfg(test)]
const FAN_OUT_SHARE: u64 = u64::MAX;
/// Placements in a part of a group solved in parts (`FAN_OUT_SHARE`).
#[cfg(not(test))]
const FAN_OUT_PART_PLACEMENTS: u64 = UNIT_PLACEMENTS;
#[cfg(test)]
const FAN_OUT_PART_PLACEMENTS: u64 = 4;

/// Element range of a unit within a region (`per_layout` elements per layout).
fn unit_elements(map: &dyn SegmentMap, index: &MaterialIndex, unit: UnitSpec, per_layout: usize) -> Range<usize> {
    let per_placement = (index.material.mover as u64) * (index.material.opponent as u64);
    let group = map.elements(unit.0);
    let start = group.start + (unit.1 * per_placement) as usize * per_layout;
    let end = group.start + (unit.2 * per_placement) as usize * per_layout;
    debug_assert!(end <= group.end);
    start..end
}

/// Own lanes of some groups of a material, in some region of memory.
struct Own<'a> {
    plane_map: &'a dyn SegmentMap,
    value_map: &'a dyn SegmentMap,
    won: &'a mut [u32],
    lost: &'a mut [u32],
    fresh: &'a mut [u32],
    capture: &'a mut [u32],
    values: &'a mut [u8],
    /// Bytes per state of `values`.
    width: ValueWidth,
    /// Streamed steps: per layout, the card states whose capture value
    /// falls due at the step's depth (filled for groups with an event due).
    due: &'a mut [u32],
    /// Resident: [`ResidentLanes::next_event`] (empty when streamed).
    next_event: &'a mut [u8],
    /// Which placements a step looks at: streamed, the window's live
    /// flags (see `sparse`); resident, [`Work::open`].
    live: Option<&'a PlacementFlags>,
}

/// Folds captures into rows `rows` into the value bytes of the units.
fn run_fold(
    moves: &MoveTable,
    index: &MaterialIndex,
    units: &[UnitSpec],
    own: Own,
    captured: &MaterialIndex,
    region: &ReadRegion<u8>,
    rows: u8,
) {
    let (p, q) = (index.material.mover as usize, index.material.opponent as usize);
    let (width, layout_bytes) = (own.width, CARD_STATES * own.width.bytes());
    let values = carve_mut(own.values, units.iter().map(|&u| unit_elements(own.value_map, index, u, layout_bytes)));
    // Captures out of an opponent slice land in a few mover slices of the
    // captured material (one per row taken in): the same order helps.
    in_landing_order(index, units, values, |(g, start, end), values| {
        let group = &index.groups()[g];
        let landing = Landing::new(group, captured, true, rows, |g| region.segment(g));
        let unit = Unit { group, p, q, start, end };
        match width {
            ValueWidth::Byte => kernel::fold_captures::<1>(moves, unit, &landing, rows, values),
            ValueWidth::Word => kernel::fold_captures::<2>(moves, unit, &landing, rows, values),
        }
    });
}

fn run_init(
    rules: &Rules,
    moves: &MoveTable,
    (index, sides): (&MaterialIndex, &SideFlags),
    units: &[UnitSpec],
    own: Own,
) -> Vec<UnitReport> {
    let (p, q) = (index.material.mover as usize, index.material.opponent as usize);
    let plane_ranges = || units.iter().map(|&u| unit_elements(own.plane_map, index, u, 1));
    let won = carve_mut(own.won, plane_ranges());
    let lost = carve_mut(own.lost, plane_ranges());
    let fresh = carve_mut(own.fresh, plane_ranges());
    let capture = carve_mut(own.capture, plane_ranges());
    let (width, layout_bytes) = (own.width, CARD_STATES * own.width.bytes());
    let values = carve_mut(own.values, units.iter().map(|&u| unit_elements(own.value_map, index, u, layout_bytes)));
    let next_event = next_event_slices(own.next_event, units.len(), plane_ranges());
    let slices: Vec<_> = won.into_iter().zip(lost).zip(fresh).zip(capture).zip(values).zip(next_event).collect();
    units
        .par_iter()
        .zip(slices)
        .map(|(&(g, start, end), (((((won, lost), fresh), capture), values), next_event))| {
            let group = &index.groups()[g];
            let own = kernel::InitLanes { won, lost, fresh, capture, values, width, next_event };
            kernel::initialize(rules, moves, Unit { group, p, q, start, end }, own, sides)
        })
        .collect()
}

/// The units' parts of [`Own::next_event`], none if it is empty (streamed).
fn next_event_slices(
    next_event: &mut [u8],
    units: usize,
    plane_ranges: impl Iterator<Item = Range<usize>>,
) -> Vec<Option<&mut [u8]>> {
    if next_event.is_empty() {
        return (0..units).map(|_| None).collect();
    }
    carve_mut(next_event, plane_ranges).into_iter().map(Some).collect()
}

/// How a step treats the value bytes of the units' groups.
#[derive(Clone, Copy)]
enum ValueMode<'a> {
    /// Resident: decided states' values are written as they are decided,
    /// this many bytes each.
    Written(ValueWidth),
    /// Streamed: value bytes are neither read nor written. Decisions are
    /// left in a plane for the decision log (`fresh`: a win step's new
    /// wins, a loss step's new losses); for the groups for which `due`
    /// holds, the `due` plane says whose capture value falls due now.
    /// A unit that is a whole group encodes its decisions for the log as
    /// soon as its kernel has run, on the worker that ran it, into its
    /// value bytes ([`encode_group`]; `sparse(g)`: does group g list its
    /// layouts, so that only its live placements are read). Encoded after
    /// all kernels, a job's largest group kept one worker alone at both
    /// ends of the settling (docs/BENCHMARKS.md, session 53).
    Logged { due: &'a (dyn Fn(usize) -> bool + Sync), sparse: &'a (dyn Fn(usize) -> bool + Sync) },
}

/// One step over the units. `landing` is the lane quiet moves land in
/// (`fresh` for a win step, `won` for a loss step); None when the material
/// lands in itself and the lane is in `own`. `due(g)`: does a capture event
/// of group g fall due at this depth?
fn run_step(
    input: &StepInput,
    index: &MaterialIndex,
    units: &[UnitSpec],
    own: Own,
    landing_in: Option<(&MaterialIndex, ReadRegion<u32>)>,
    due: &(dyn Fn(usize) -> bool + Sync),
    mode: ValueMode,
) -> (Vec<UnitReport>, Vec<(usize, EncodedParts)>) {
    let (p, q) = (index.material.mover as usize, index.material.opponent as usize);
    let (plane_map, own_live) = (own.plane_map, own.live);
    // A whole group's decisions (`decided`, its words of the plane holding
    // them) encoded into its value bytes, if the mode logs them and they fit.
    let is_whole = |(g, start, end): UnitSpec| Unit { group: &index.groups()[g], p, q, start, end }.is_whole_group();
    let encode_early = |u: UnitSpec, report: &UnitReport, decided: &[u32], values: &mut [u8]| {
        let ValueMode::Logged { sparse, .. } = mode else { return None };
        let g = u.0;
        if !is_whole(u) || report.decided == 0 || !fits_encoded(decided.len(), p * q, values.len()) {
            return None;
        }
        let live = own_live.filter(|_| sparse(g)).map(|live| (live, plane_map.elements(g).start));
        Some(encode_group(decided, p * q, live, values))
    };
    // A streamed mirroring step's large groups are solved in parts in
    // parallel (nested in the group's task, which holds all its words):
    // a part writes no image words, since another part may hold them
    // (`kernel::Image::first`), so once all parts have run the group's
    // task writes them (`kernel::mirror_decisions`) and encodes the group.
    let job_layouts: u64 = units.iter().map(|&(_, start, end)| (end - start) * (p * q) as u64).sum();
    let fan_out_above = job_layouts / FAN_OUT_SHARE.saturating_mul(rayon::current_num_threads() as u64);
    let fan_out = |(g, start, end): UnitSpec| {
        let group = &index.groups()[g];
        let fans_out = matches!(mode, ValueMode::Logged { .. })
            && input.mirror.is_some()
            && group.layouts > fan_out_above
            && end - start > FAN_OUT_PART_PLACEMENTS;
        fans_out.then(|| {
            debug_assert!(is_whole((g, start, end)), "mirroring units are whole groups");
            let first = plane_map.elements(g).start;
            let parts = parts_of(index, &[g], FAN_OUT_PART_PLACEMENTS);
            let ranges: Vec<Range<usize>> = (parts.iter())
                .map(|&part| unit_elements(plane_map, index, part, 1))
                .map(|r| r.start - first..r.end - first)
                .collect();
            (parts, ranges)
        })
    };
    let mirror_decisions = |(g, start, end): UnitSpec, words: (&mut [u32], &mut [u32]), clears: bool| {
        let group = &index.groups()[g];
        let live = own_live.map(|live| (live, plane_map.elements(g).start));
        let mirror = input.mirror.expect("only mirroring steps solve groups in parts");
        kernel::mirror_decisions(mirror, Unit { group, p, q, start, end }, live, words, clears);
    };
    let plane_ranges = || units.iter().map(|&u| unit_elements(plane_map, index, u, 1));
    let layout_bytes = CARD_STATES * own.width.bytes();
    let values = carve_mut(own.values, units.iter().map(|&u| unit_elements(own.value_map, index, u, layout_bytes)));
    let due_states: Vec<&[u32]> = match mode {
        ValueMode::Logged { .. } => plane_ranges().map(|r| &own.due[r]).collect(),
        ValueMode::Written(_) => units.iter().map(|_| &[][..]).collect(),
    };
    let values: Vec<_> =
        values.into_iter().zip(next_event_slices(own.next_event, units.len(), plane_ranges())).collect();
    if input.depth_plies % 2 == 1 {
        let won = carve_mut(own.won, plane_ranges());
        let (lost, capture) = (&*own.lost, &*own.capture);
        // Streamed, `fresh` is free in a win step (the landing lane is in a
        // slice buffer) and takes the new wins.
        let (newly_won, fresh): (Vec<Option<&mut [u32]>>, &[u32]) = match mode {
            ValueMode::Logged { .. } => (carve_mut(own.fresh, plane_ranges()).into_iter().map(Some).collect(), &[]),
            ValueMode::Written(_) => (units.iter().map(|_| None).collect(), &*own.fresh),
        };
        let (target, region) = landing_in.unwrap_or((index, ReadRegion { map: plane_map, data: fresh }));
        let input = &StepInput { landing_lane: region.data, ..*input };
        let slices: Vec<_> = won.into_iter().zip(newly_won).zip(values).zip(due_states).collect();
        let done = in_landing_order(index, units, slices, |u, (((won, mut newly_won), mut values), due_states)| {
            let (g, start, end) = u;
            let group = &index.groups()[g];
            let r = unit_elements(plane_map, index, u, 1);
            let own = kernel::WinLanes {
                won,
                newly_won: newly_won.as_deref_mut(),
                values: step_values(mode, g, (&mut *values.0, values.1.as_deref_mut()), due_states),
                lost: &lost[r.clone()],
                capture: &capture[r.clone()],
                capture_due: due(g),
                lane_start: r.start,
                live: own_live,
            };
            let landing = Landing::new(group, target, false, 0x1f, |g| region.segment(g));
            let report = match fan_out(u) {
                None => kernel::win_step(input, Unit { group, p, q, start, end }, &landing, own),
                Some((parts, ranges)) => {
                    let kernel::WinLanes { won, newly_won, .. } = own;
                    let newly_won = newly_won.expect("a streamed win step keeps its new wins");
                    let won_parts = carve_mut(&mut *won, ranges.iter().cloned());
                    let new_parts = carve_mut(&mut *newly_won, ranges.iter().cloned());
                    let part_lanes: Vec<_> = won_parts.into_iter().zip(new_parts).zip(&ranges).collect();
                    let report = (parts.par_iter().zip(part_lanes))
                        .map(|(&(_, start, end), ((won, newly_won), range))| {
                            let own = kernel::WinLanes {
                                won,
                                newly_won: Some(newly_won),
                                values: StepValues::Logged(due(g).then(|| &due_states[range.clone()])),
                                lost: &lost[r.start + range.start..r.start + range.end],
                                capture: &capture[r.start + range.start..r.start + range.end],
                                capture_due: due(g),
                                lane_start: r.start + range.start,
                                live: own_live,
                            };
                            kernel::win_step(input, Unit { group, p, q, start, end }, &landing, own)
                        })
                        .reduce(UnitReport::default, UnitReport::merge);
                    mirror_decisions(u, (won, newly_won), false);
                    report
                }
            };
            let encoded = newly_won.and_then(|decided| encode_early(u, &report, decided, values.0));
            (report, encoded)
        });
        reports_and_early(units, done)
    } else {
        let lost = carve_mut(own.lost, plane_ranges());
        let fresh = carve_mut(own.fresh, plane_ranges());
        let capture = carve_mut(own.capture, plane_ranges());
        let won = &*own.won;
        let (target, region) = landing_in.unwrap_or((index, ReadRegion { map: plane_map, data: won }));
        let input = &StepInput { landing_lane: region.data, ..*input };
        let slices: Vec<_> = lost.into_iter().zip(fresh).zip(capture).zip(values).zip(due_states).collect();
        let done = in_landing_order(index, units, slices, |u, ((((lost, fresh), capture), mut values), due_states)| {
            let (g, start, end) = u;
            let group = &index.groups()[g];
            let r = unit_elements(plane_map, index, u, 1);
            let own = kernel::LossLanes {
                lost,
                fresh: &mut *fresh,
                capture,
                values: step_values(mode, g, (&mut *values.0, values.1.as_deref_mut()), due_states),
                won: &won[r.clone()],
                capture_due: due(g),
                lane_start: r.start,
                live: own_live,
                drop_decided: matches!(mode, ValueMode::Written(_)),
                images_lost: !matches!(mode, ValueMode::Written(_)),
            };
            let landing = Landing::new(group, target, false, 0x1f, |g| region.segment(g));
            let report = match fan_out(u) {
                None => kernel::loss_step(input, Unit { group, p, q, start, end }, &landing, own),
                Some((parts, ranges)) => {
                    let kernel::LossLanes { lost, fresh, capture, drop_decided, images_lost, .. } = own;
                    let part_lanes: Vec<_> = (carve_mut(&mut *lost, ranges.iter().cloned()).into_iter())
                        .zip(carve_mut(&mut *fresh, ranges.iter().cloned()))
                        .zip(carve_mut(capture, ranges.iter().cloned()))
                        .zip(&ranges)
                        .collect();
                    let report = (parts.par_iter().zip(part_lanes))
                        .map(|(&(_, start, end), (((lost, fresh), capture), range))| {
                            let own = kernel::LossLanes {
                                lost,
                                fresh,
                                capture,
                                values: StepValues::Logged(due(g).then(|| &due_states[range.clone()])),
                                won: &won[r.start + range.start..r.start + range.end],
                                capture_due: due(g),
                                lane_start: r.start + range.start,
                                live: own_live,
                                drop_decided,
                                images_lost,
                            };
                            kernel::loss_step(input, Unit { group, p, q, start, end }, &landing, own)
                        })
                        .reduce(UnitReport::default, UnitReport::merge);
                    mirror_decisions(u, (lost, fresh), true);
                    report
                }
            };
            let encoded = encode_early(u, &report, fresh, values.0);
            (report, encoded)
        });
        reports_and_early(units, done)
    }
}

/// The units' reports, and the groups encoded early with their parts.
fn reports_and_early(
    units: &[UnitSpec],
    done: Vec<(UnitReport, Option<EncodedParts>)>,
) -> (Vec<UnitReport>, Vec<(usize, EncodedParts)>) {
    let mut early = Vec::new();
    let reports = (units.iter().zip(done))
        .map(|(u, (report, encoded))| {
            early.extend(encoded.map(|parts| (u.0, parts)));
            report
        })
        .collect();
    (reports, early)
}

/// Runs `kernel` on every unit with its slices, in parallel, in landing
/// order: the units of groups with equal opponent counts (whose quiet moves
/// all land in one mover slice of the mirror, see `schedule`) one after
/// the other, so that a worker's successor reads stay in the cache. (Index
/// order changes the landing slice at every group, and a group's landing
/// groups were read from memory again for each of the up to 15 groups
/// moving into them.) Returns the results in the order of `units`.
fn in_landing_order<S: Send, R: Send>(
    index: &MaterialIndex,
    units: &[UnitSpec],
    slices: Vec<S>,
    kernel: impl Fn(UnitSpec, S) -> R + Sync,
) -> Vec<R> {
    let mut jobs: Vec<(usize, UnitSpec, S)> =
        units.iter().copied().zip(slices).enumerate().map(|(k, (u, s))| (k, u, s)).collect();
    jobs.sort_by_key(|&(k, (g, _, _), _)| (index.groups()[g].opponent_counts, k));
    // The workers take the units in turn from the front (`par_bridge`),
    // not a half each as an indexed split would: so at any time they work
    // on neighbouring units, mostly of one group, whose landing groups they
    // then share in the cache.
    let mut done: Vec<(usize, R)> = jobs.into_iter().par_bridge().map(|(k, u, s)| (k, kernel(u, s))).collect();
    done.sort_unstable_by_key(|&(k, _)| k);
    done.into_iter().map(|(_, r)| r).collect()
}

/// A unit of group `g`'s value bytes (and, resident, next event depths) in
/// a step.
fn step_values<'v>(
    mode: ValueMode,
    g: usize,
    (values, next_event): (&'v mut [u8], Option<&'v mut [u8]>),
    due_states: &'v [u32],
) -> StepValues<'v> {
    match mode {
        ValueMode::Written(width) => {
            StepValues::Written { values, next_event: next_event.expect("resident lanes have next_event"), width }
        }
        ValueMode::Logged { due, .. } => StepValues::Logged(due(g).then_some(due_states)),
    }
}

/// Where a pass's undecided counts per group come from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum UndecidedCount {
    /// The kernels' reports.
    Reported,
    /// The count before the pass less the states it decided (exact: every
    /// decision is of an undecided state), for a streamed win step, whose
    /// kernels count a dense group's lost states as undecided (it reads
    /// no `lost`; DESIGN.md, "Win steps without `lost`").
    LessDecided,
}

/// Stores per-group results of a pass; returns their total.
fn record_reports(
    groups: &mut [GroupState],
    changed: &mut GroupFlags,
    (units, reports): (&[UnitSpec], &[UnitReport]),
    mark: bool,
    count: UndecidedCount,
) -> UnitReport {
    let mut total = UnitReport::default();
    let mut i = 0;
    while i < units.len() {
        let g = units[i].0;
        let mut merged = UnitReport::default();
        while i < units.len() && units[i].0 == g {
            merged = UnitReport::merge(merged, reports[i]);
            i += 1;
        }
        groups[g].undecided = match count {
            UndecidedCount::Reported => merged.undecided,
            UndecidedCount::LessDecided => {
                let before = groups[g].undecided;
                assert!(
                    merged.decided <= before,
                    "group {g} decided {} of its {before} undecided states",
                    merged.decided
                );
                before - merged.decided
            }
        };
        if !mark {
            // Initialisation: the only pass that reports capture events.
            // Its no-move losses are what the first win step's moves can
            // lead into, so they alone count as changed.
            groups[g].events = merged.events;
            changed.now[g] = merged.lost_at_start > 0;
        }
        if mark && merged.decided > 0 {
            changed.now[g] = true;
        }
        total = UnitReport::merge(total, merged);
    }
    total
}

/// Groups of `this` that a step at `depth` must visit, in increasing order:
/// those with undecided states whose landing groups changed in the last
/// step, or with a capture event due.
fn groups_to_visit(this: &Work, target: &Work, depth: u16, among: &[usize]) -> Vec<usize> {
    among
        .iter()
        .copied()
        .filter(|&g| {
            let state = this.groups[g];
            if state.undecided == 0 {
                return false;
            }
            // The first loss step has no answer of two steps ago to keep.
            if depth == 2 || state.events.contains(depth) {
                return true;
            }
            let group = &this.index.groups()[g];
            schedule::landing_groups(group, &target.index).into_iter().any(|t| target.changed.last[t])
        })
        .collect()
}

/// Debug builds, after each resident step: every placement dropped from
/// [`Work::open`] has all its states decided and no `fresh` word (so that
/// walking it again would change nothing).
fn check_dropped(
    index: &MaterialIndex,
    planes: &LaneLayout,
    (solved, open): (Option<&SolvedPlacements>, Option<&PlacementFlags>),
    lanes: &ResidentLanes,
) {
    let open = open.expect("resident steps walk the open placements");
    let words = index.material.mover as usize * index.material.opponent as usize;
    for (g, group) in index.groups().iter().enumerate() {
        let origin = (planes.segment(g).start / 4) as usize;
        for first in (origin..origin + group.layouts as usize).step_by(words) {
            if solved.is_none_or(|solved| solved.flags().get(first)) && !open.get(first) {
                let n = first..first + words;
                let decided =
                    lanes.won[n.clone()].iter().zip(&lanes.lost[n.clone()]).all(|(w, l)| w | l == ALL_CARD_STATES);
                assert!(decided && lanes.fresh[n].iter().all(|&w| w == 0), "placement at {first} of group {g} dropped");
            }
        }
    }
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

/// Where a captured (smaller, finished) material's values are.
struct Captured<'a> {
    index: &'a MaterialIndex,
    layout: &'a LaneLayout,
    values: CapturedValues<'a>,
}

enum CapturedValues<'a> {
    Resident(&'a [u8]),
    Packed(&'a PackedValues),
}

/// Resident lanes as the own lanes of the whole material.
fn own_resident<'a>(
    lanes: &'a mut ResidentLanes,
    width: ValueWidth,
    pm: &'a dyn SegmentMap,
    vm: &'a dyn SegmentMap,
) -> Own<'a> {
    Own {
        plane_map: pm,
        value_map: vm,
        won: &mut lanes.won,
        lost: &mut lanes.lost,
        fresh: &mut lanes.fresh,
        capture: &mut lanes.capture,
        values: &mut lanes.values,
        width,
        due: &mut [],
        next_event: &mut lanes.next_event,
        live: None,
    }
}

/// Stores per-group results of a pass; returns their total.
fn record(
    work: &mut Work,
    units: &[UnitSpec],
    reports: &[UnitReport],
    mark: bool,
    count: UndecidedCount,
) -> UnitReport {
    record_reports(&mut work.groups, &mut work.changed, (units, reports), mark, count)
}

fn initialize(
    rules: &Rules,
    moves: &MoveTable,
    work: &mut Work,
    captured: Option<&Captured>,
    window: Option<(&mut Window, &mut DiskIo)>,
) -> Result<UnitReport, SolveError> {
    let Some((window, disk)) = window else {
        let all: Vec<usize> = (0..work.index.groups().len()).collect();
        let units = step_units(moves, &work.index, &all);
        let (pm, vm) = (plane_span(&work.planes), value_span(&work.values));
        let Storage::Resident(lanes) = &mut work.storage else { unreachable!("no window: resident") };
        if let Some(c) = captured {
            let CapturedValues::Resident(values) = c.values else { unreachable!("resident pairs load captures") };
            let map = value_span(c.layout);
            let region = ReadRegion { map: &map, data: values };
            run_fold(moves, &work.index, &units, own_resident(lanes, work.width, &pm, &vm), c.index, &region, 0x1f);
        }
        let own = own_resident(lanes, work.width, &pm, &vm);
        let reports = run_init(rules, moves, (&work.index, &work.sides), &units, own);
        return Ok(record(work, &units, &reports, false, UndecidedCount::Reported));
    };
    let mut total = UnitReport::default();
    // Initialisation's losses (no move, under the loss rule) are the first
    // win step's landing `fresh`: the log's segment at depth 0.
    work.files().log().begin_step(0);
    // The captured groups unpacked in the slice buffer, kept from batch to
    // batch (the capture schedule is sorted in the `due` plane instead).
    let mut unpacked = UnpackedGroups::new(window.slices[0].len());
    for (opponent_counts, groups) in schedule::opponent_slices(&work.index) {
        for batch in window.batches(work, &groups) {
            let (pm, vm) = window.load(disk, work, &batch, (&[], PlaneLoad::Zeroed, ValueSegments::Zeroed))?;
            let units = step_units(moves, &work.index, &batch);
            if let Some(c) = captured {
                let rows = (0..ROWS).filter(|&r| opponent_counts[r] > 0).fold(0u8, |rows, r| rows | 1 << r);
                // Every row's captures in one pass if the groups they land
                // in fit the buffer together; else a row at a time (one
                // captured slice fits: the buffer is sized for it).
                let mut fold = |rows| {
                    fold_batch_captures(moves, work, c, &units, &batch, rows, (&mut *window, &mut unpacked), (&pm, &vm))
                };
                if !(all_rows_together(&batch) && fold(rows)?) {
                    for row in (0..ROWS).filter(|&r| rows & 1 << r != 0) {
                        assert!(fold(1 << row)?, "a captured slice fits the slice buffer");
                    }
                }
            }
            let reports = run_init(rules, moves, (&work.index, &work.sides), &units, window.owns[0].own(&pm, &vm));
            // Not the values: the capture schedule below is all the steps
            // need of them, and finishing makes them from the planes and
            // the decision log, so the material has no value file till then.
            let written = [Lane::Won, Lane::Lost, Lane::Capture];
            window.store(disk, work, &pm, &written, |_| true)?;
            // The batch's capture schedule, sorted by depth in the `due`
            // plane (initialisation has no due states), its frames packed
            // in the second window's values if there is one (idle until
            // the steps).
            let Storage::OnDisk(files) = &mut work.storage else { unreachable!("streamed") };
            let (first, second) = window.owns.split_at_mut(1);
            let ((capture, values), scratch) = first[0].captures_and_scratch();
            let mut packing = second.first_mut().map(OwnBuffers::values_mut);
            for &g in &batch {
                let planes = (&capture[pm.elements(g)], &values[vm.elements(g)]);
                let (schedule, packing) = (files.schedule_mut(), packing.as_deref_mut());
                match work.width {
                    ValueWidth::Byte => {
                        let depth_of = |byte: u8| Value::from_byte(byte).and_then(Value::plies);
                        capture_schedule::write_group(schedule, g, planes, depth_of, scratch, packing)?;
                    }
                    ValueWidth::Word => {
                        let depth_of = |word: u16| Value::from_word(word).and_then(Value::plies);
                        capture_schedule::write_group_words(schedule, g, planes, depth_of, scratch, packing)?;
                    }
                }
            }
            // The values are no longer needed: their buffer encodes the log.
            let decided = deciding_groups(&units, &reports);
            // Initialisation looks at every placement.
            let ((fresh, _), scratch) = window.owns[0].decided_and_scratch();
            log_decisions(work, &decided, (&pm, &vm), ((fresh, None), scratch), &[])?;
            total = UnitReport::merge(total, record(work, &units, &reports, false, UndecidedCount::Reported));
        }
    }
    disk.drain()?;
    let Storage::OnDisk(files) = &mut work.storage else { unreachable!("streamed") };
    files.schedule_mut().seal()?;
    Ok(total)
}

/// Whether initialisation tries to fold the captures of all of `batch`'s
/// rows in one pass. Unit tests fold those of a batch that starts at an odd
/// group a row at a time, as a batch whose captured groups do not fit the
/// slice buffer together is folded (6 men with 32 MiB has such batches; no
/// table small enough for the tests has one).
fn all_rows_together(batch: &[usize]) -> bool {
    !cfg!(test) || batch[0].is_multiple_of(2)
}

/// Folds the captures of `batch` (loaded in the first window) into rows
/// `rows` into its value bytes, from the captured groups they land in,
/// which `unpacked` makes the slice buffer hold. Returns false, folding
/// nothing, if those groups do not fit the buffer together.
#[allow(clippy::too_many_arguments)]
fn fold_batch_captures(
    moves: &MoveTable,
    work: &Work,
    c: &Captured,
    units: &[UnitSpec],
    batch: &[usize],
    rows: u8,
    (window, unpacked): (&mut Window, &mut UnpackedGroups),
    (pm, vm): (&Packed, &Packed),
) -> Result<bool, SolveError> {
    let CapturedValues::Packed(packed) = c.values else { unreachable!("streamed pairs unpack captures") };
    let mut needed: Vec<usize> = batch
        .iter()
        .flat_map(|&g| {
            kernel::landing_group_numbers(&work.index.groups()[g], c.index, true, rows).into_iter().flatten()
        })
        .collect();
    needed.sort_unstable();
    needed.dedup();
    let Window { owns, slices, io, .. } = window;
    // A pair in words reads value bytes widened.
    let widened = c.layout.bytes_per_layout() < (CARD_STATES * work.width.bytes()) as u64;
    let bytes = |g: usize| {
        let segment = c.layout.segment(g);
        (segment.end - segment.start) as usize * if widened { 2 } else { 1 }
    };
    let unpack = |g: usize, into: &mut [u8]| match widened {
        false => packed.read_group(g, into),
        true => {
            let len = into.len() / 2;
            packed.read_group(g, &mut into[..len])?;
            widen_within(into, 0, 0, len);
            Ok(())
        }
    };
    let Some(fresh) = unpacked.hold(&needed, bytes, slices[0].bytes_mut(), unpack)? else {
        return Ok(false);
    };
    io.bytes_read += packed.packed_bytes(fresh);
    let region = ReadRegion { map: &*unpacked, data: slices[0].bytes() };
    run_fold(moves, &work.index, units, owns[0].own(pm, vm), c.index, &region, rows);
    Ok(true)
}

/// Both elements of a two-element slice, element `i` first.
fn pair_mut<T>(pair: &mut [T], i: usize) -> (&mut T, &mut T) {
    let [a, b] = pair else { unreachable!("two windows") };
    if i == 0 { (a, b) } else { (b, a) }
}

/// Checkpoints of a streamed pair: where they are recorded, how often.
struct PairCheckpoints<'a> {
    checkpoint: &'a mut Checkpoint,
    every: Duration,
    last: Instant,
    /// When this run took the pair up, and the time earlier runs spent on
    /// it: the record's `spent_ms`.
    started: Instant,
    spent_before: Duration,
}

/// Where a pair's stepping stands: what a checkpoint records besides the
/// per-material state.
#[derive(Clone, Copy)]
struct PairState {
    depth_plies: u16,
    steps_done: bool,
    decided: u64,
    pending_plies: u16,
    quiet_steps: u32,
}

/// Records the pair's state in the checkpoint if it is due (or `force`):
/// syncs the work files, writes the record, then lets later writes reuse
/// the slots the previous record named.
fn record_pair(
    checkpoints: &mut Option<PairCheckpoints>,
    works: &mut [Work],
    window: &mut Option<(&mut Window, &mut DiskIo)>,
    state: PairState,
    force: bool,
) -> Result<(), SolveError> {
    let (Some(cp), Some((_, disk))) = (checkpoints.as_mut(), window.as_mut()) else { return Ok(()) };
    if !force && cp.last.elapsed() < cp.every {
        return Ok(());
    }
    let mut records = Vec::new();
    let mut kept = Vec::new();
    for work in works.iter() {
        let (record, slots) = work.checkpoint_record(disk)?;
        records.push(record);
        kept.push(slots);
    }
    cp.checkpoint.record_step(PairRecord {
        materials: works.iter().map(|w| (w.index.material.mover, w.index.material.opponent)).collect(),
        depth_plies: state.depth_plies,
        steps_done: state.steps_done,
        decided: state.decided,
        pending_plies: state.pending_plies,
        quiet_steps: state.quiet_steps,
        spent_ms: millis(cp.spent_before + cp.started.elapsed()),
        words: works[0].width == ValueWidth::Word,
        works: records,
    })?;
    for (work, slots) in works.iter_mut().zip(kept) {
        if let Storage::OnDisk(files) = &mut work.storage {
            files.keep(slots)?;
        }
    }
    cp.last = Instant::now();
    Ok(())
}

/// Solves a pair: initialisation, steps until nothing is left to decide,
/// draws. A streamed pair records checkpoints as it goes and can start from
/// one (`resume`); its change flags then start all set, which costs one
/// slower step and changes nothing else.
#[allow(clippy::too_many_arguments)]
fn solve_pair(
    rules: &Rules,
    moves: &MoveTable,
    works: &mut [Work],
    captured: &[Option<Captured>],
    mut window: Option<(&mut Window, &mut DiskIo)>,
    resume: Option<&PairRecord>,
    mut checkpoints: Option<PairCheckpoints>,
    (widening, narrow): (Widening, bool),
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(), SolveError> {
    macro_rules! reborrow {
        () => {
            window.as_mut().map(|(w, d)| (&mut **w, &mut **d))
        };
    }
    let groups: u64 = works.iter().map(|w| w.index.groups().len() as u64).sum();
    let io_now = |window: &Option<(&mut Window, &mut DiskIo)>| window.as_ref().map_or(IoTotals::default(), |w| w.0.io);
    let mut state = match resume {
        Some(r) => PairState {
            depth_plies: r.depth_plies,
            steps_done: r.steps_done,
            decided: r.decided,
            pending_plies: r.pending_plies,
            quiet_steps: r.quiet_steps,
        },
        None => {
            let mut state =
                PairState { depth_plies: 0, steps_done: false, decided: 0, pending_plies: 0, quiet_steps: 0 };
            for (work, captured) in works.iter_mut().zip(captured) {
                let report = initialize(rules, moves, work, captured.as_ref(), reborrow!())?;
                state.decided += report.decided;
                state.pending_plies = state.pending_plies.max(report.events.deepest());
            }
            // What initialisation lost is what changed before the first
            // step. (A run resumed after it has every flag set, as after
            // any step: slower, the same table.)
            for work in works.iter_mut() {
                work.sides.end_step();
                work.changed.end_step();
            }
            let io = io_now(&window);
            progress(Progress::Step {
                depth_plies: 0,
                decided: state.decided,
                groups_visited: groups,
                groups,
                groups_sparse: 0,
                io,
                times: StepTimes::default(),
            });
            record_pair(&mut checkpoints, works, &mut window, state, false)?;
            state
        }
    };
    while !state.steps_done {
        let depth = state.depth_plies + 1;
        if depth > works[0].width.max_loss_plies() + 1 {
            let material = works[0].index.material;
            let (drop_move_lists, make_window) = match widening {
                Widening::InPlace { drop_move_lists, window } => (drop_move_lists, window),
                Widening::Refused { needed_budget_bytes } => {
                    return Err(SolveError::TooDeep { material, needed_budget_bytes });
                }
            };
            for work in works.iter_mut() {
                if drop_move_lists {
                    (work.kept, work.fresh_placements) = (None, None);
                }
                work.widen_values();
            }
            if let (Some((window, _)), Some(make_window)) = (window.as_mut(), make_window) {
                let io = window.io;
                (window.owns, window.slices) = (Vec::new(), Vec::new());
                **window = make_window(works)?;
                window.io = io;
            }
            progress(Progress::Widened { material });
        }
        let (mut new, mut groups_visited, mut times) = (0, 0, StepTimes::default());
        for work in works.iter_mut() {
            work.landing_holes = settled_groups(&work.groups);
        }
        for i in 0..works.len() {
            let (decided, visited, material_times) = step::step(rules, moves, works, i, depth, reborrow!(), progress)?;
            new += decided;
            groups_visited += visited;
            times += material_times;
        }
        state.depth_plies = depth;
        state.decided += new;
        for work in works.iter_mut() {
            work.sides.end_step();
            work.changed.end_step();
        }
        let io = io_now(&window);
        let groups_sparse = works.iter().flat_map(|w| &w.groups).filter(|g| g.sparse_layouts > 0).count() as u64;
        progress(Progress::Step {
            depth_plies: depth,
            decided: state.decided,
            groups_visited,
            groups,
            groups_sparse,
            io,
            times,
        });
        state.quiet_steps = if new == 0 { state.quiet_steps + 1 } else { 0 };
        state.steps_done = state.quiet_steps >= 2 && depth >= state.pending_plies;
        record_pair(&mut checkpoints, works, &mut window, state, state.steps_done)?;
    }
    for work in works.iter_mut() {
        finish::finish(moves, work, reborrow!(), narrow, progress)?;
    }
    Ok(())
}

/// Solves every material with 1..=`max_per_side` pieces per side, in memory.
pub fn solve(rules: &Rules, max_per_side: usize, progress: &(dyn Fn(Progress) + Sync)) -> Result<Table, SolveError> {
    solve_with(rules, max_per_side, &SolveConfig::default(), progress)?.into_table()
}

/// Buffers of the streamed I/O, one request in flight each. 32 rather than
/// 8 of a quarter the size (the same memory): at 6 men a step's reads are
/// one request per group segment of about 100 KiB, bound by the disk's
/// latency, and ran 6.5% faster in wall time so (BENCHMARKS.md, session 14).
const IO_BLOCKS: usize = 32;
/// The largest I/O block: 32 of them are 32 MiB in flight.
const IO_BLOCK_BYTES_MAX: u64 = 1 << 20;
/// The smallest I/O block, for small budgets.
const IO_BLOCK_BYTES_MIN: u64 = 16 << 10;

/// I/O block size for a budget: a 128th of it, within the limits, so the
/// I/O blocks take at most a quarter of the budget.
fn io_block_bytes(budget_bytes: Option<u64>) -> u64 {
    let wanted = budget_bytes.map_or(IO_BLOCK_BYTES_MAX, |b| b / 128);
    wanted.clamp(IO_BLOCK_BYTES_MIN, IO_BLOCK_BYTES_MAX) / SEGMENT_ALIGN_BYTES * SEGMENT_ALIGN_BYTES
}

/// Materials solved together: a material and its mirror, or a material
/// that is its own mirror alone.
struct Pair {
    members: Vec<Material>,
    /// The memory the pair needs solved in memory: its resident lanes and
    /// the values of the materials its captures lead to, with value bytes.
    resident_bytes: u64,
    /// The same with value words: an upper bound of what a pair solved in
    /// bytes holds while it is widened (`Work::widen_values`), and what one
    /// solved in words holds.
    resident_word_bytes: u64,
}

impl Pair {
    /// Is the pair, solved with values of `width`, streamed through the
    /// work directory (it does not fit the budget, or the tests force it)
    /// rather than solved in memory?
    fn is_streamed(&self, config: &SolveConfig, width: ValueWidth) -> bool {
        config.work_dir.is_some()
            && (config.force_streamed || config.budget_bytes.is_some_and(|b| b < self.resident_bytes_at(width)))
    }

    fn resident_bytes_at(&self, width: ValueWidth) -> u64 {
        match width {
            ValueWidth::Byte => self.resident_bytes,
            ValueWidth::Word => self.resident_word_bytes,
        }
    }
}

/// Who reads `material`'s packed values back in a run of `max_per_side`
/// pieces a side. A capture from (p, q) lands in (q - 1, p), so a
/// material whose mover has `max_per_side` pieces is captured into by no
/// pair: only its shard's writer reads it (at 8 men, 4v1 to 4v4, 85% of
/// the values finished in the work directory).
fn value_readers(material: Material, max_per_side: usize) -> Readers {
    if material.mover as usize >= max_per_side { Readers::ShardOnly } else { Readers::CapturesAndShard }
}

/// The pairs with 1..=`max_per_side` pieces per side, in the order they are
/// solved (each after the materials its captures lead to).
fn pairs_up_to(max_per_side: usize) -> Vec<Pair> {
    let resident_bytes = |m: Material, width: ValueWidth| {
        let captured = (m.opponent > 1).then(|| Material::new(m.opponent as usize - 1, m.mover as usize));
        let index = MaterialIndex::new(m);
        ResidentLanes::bytes(&LaneLayout::new(&index, 4), &value_layout(&index, width))
            + captured.map_or(0, |c| value_layout(&MaterialIndex::new(c), width).total_bytes())
    };
    Material::all_up_to(max_per_side)
        .into_iter()
        .filter(|m| m.mover <= m.opponent)
        .map(|m| {
            let members = if m.mover == m.opponent { vec![m] } else { vec![m, m.flipped()] };
            let at = |width| members.iter().map(|&m| resident_bytes(m, width)).sum();
            let (resident_bytes, resident_word_bytes) = (at(ValueWidth::Byte), at(ValueWidth::Word));
            Pair { members, resident_bytes, resident_word_bytes }
        })
        .collect()
}

/// The memory the largest pair needs solved in memory (its lanes and the
/// values its captures read), and its first material. A run's peak is at
/// least this or its budget, whichever is less (a streamed pair's buffers
/// take the budget): known before solving, to hold against the memory the
/// machine has.
pub fn largest_pair_bytes(max_per_side: usize) -> (u64, Material) {
    let largest = pairs_up_to(max_per_side).into_iter().max_by_key(|pair| pair.resident_bytes);
    largest.map(|pair| (pair.resident_bytes, pair.members[0])).expect("at least one pair")
}

/// Solves every material with 1..=`max_per_side` pieces per side, streaming
/// pairs that do not fit `config.budget_bytes` through the work directory.
pub fn solve_with(
    rules: &Rules,
    max_per_side: usize,
    config: &SolveConfig,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Solved, SolveError> {
    if !(1..=MAX_PIECES_PER_SIDE).contains(&max_per_side) {
        return Err(SolveError::Size(max_per_side));
    }
    let mut moves = MoveTable::new(rules);
    if !config.mirror {
        moves.mirror = None;
    }
    let io_block = io_block_bytes(config.budget_bytes);
    if let (Some(budget), Some(_)) = (config.budget_bytes, &config.work_dir) {
        let minimum = minimum_budget(max_per_side, io_block);
        if budget < minimum {
            return Err(SolveError::BudgetTooSmall { budget_bytes: budget, minimum_bytes: minimum });
        }
    }
    let mut checkpoint = match &config.work_dir {
        Some(dir) => {
            // A mirror-closed set solved without its mirror is another run.
            let mirror_off = moves.mirror.is_none() && Mirror::of(&rules.cards).is_some();
            Some(Checkpoint::open(dir, (rules, max_per_side, mirror_off), config.resume)?)
        }
        None => None,
    };
    let all_pairs = pairs_up_to(max_per_side);
    let to_solve = all_pairs
        .iter()
        .filter(|pair| !pair.members.iter().all(|m| checkpoint.as_ref().is_some_and(|cp| cp.is_finished(*m))))
        .map(|pair| PairPlan {
            materials: [pair.members[0], pair.members[0].flipped()],
            layouts: pair.members.iter().map(|&m| MaterialIndex::new(m).layouts()).sum(),
            streamed: pair.is_streamed(config, config.value_width.unwrap_or_default()),
        })
        .collect();
    let earlier = checkpoint.as_ref().map_or(Vec::new(), |cp| cp.pair_times().to_vec());
    progress(Progress::RunStarted { pairs: to_solve, earlier });
    let mut solved: BTreeMap<Material, FinishedMaterial> = BTreeMap::new();
    let mut io = IoTotals::default();
    let mut streamed_pairs = 0;
    let mut pairs = 0;
    let mut disk: Option<DiskIo> = None;
    for planned in all_pairs {
        let material = planned.members[0];
        let pair = [material, material.flipped()];
        pairs += 1;
        if let (Some(dir), Some(cp)) = (&config.work_dir, &checkpoint)
            && planned.members.iter().all(|m| cp.is_finished(*m))
        {
            for &m in &planned.members {
                solved.insert(m, open_finished(dir, m)?);
            }
            progress(Progress::MaterialResumed { materials: pair });
            continue;
        }
        let captured_of =
            |m: Material| (m.opponent > 1).then(|| &solved[&Material::new(m.opponent as usize - 1, m.mover as usize)]);
        // Bytes, unless the run asks for words, captures lead to a material
        // with words (whose values a byte may not hold), or an earlier run
        // widened the pair before its checkpoint: a pair that goes deeper
        // than bytes widens as it goes (`Widening`).
        let word_captures = planned.members.iter().filter_map(|&m| captured_of(m)).any(|c| c.width == ValueWidth::Word);
        let widened_before = checkpoint.as_ref().and_then(|cp| cp.pair(&planned.members)).is_some_and(|r| r.words);
        let width = match config.value_width {
            Some(width) => width,
            None if word_captures || widened_before => ValueWidth::Word,
            None => ValueWidth::Byte,
        };
        let streamed = planned.is_streamed(config, width);
        let (resident_bytes, in_memory_bytes) = (planned.resident_bytes_at(width), planned.resident_word_bytes);
        let Pair { members, .. } = planned;
        let indexes: Vec<MaterialIndex> = members.iter().map(|&m| MaterialIndex::new(m)).collect();
        if streamed && disk.is_none() {
            let opened = DiskIo::new(config.io, io_block as usize, IO_BLOCKS)?;
            progress(Progress::IoBackend {
                backend: opened.backend(),
                fallback: opened.fallback_note().map(str::to_string),
            });
            disk = Some(opened);
        }
        // A streamed pair that an earlier run checkpointed goes on from there.
        let resume: Option<PairRecord> =
            checkpoint.as_ref().filter(|_| streamed).and_then(|cp| cp.pair(&members)).cloned();
        if resume.as_ref().is_some_and(|r| r.works.len() != members.len()) {
            return Err(SolveError::DamagedCheckpoint(material));
        }
        let mut works: Vec<Work> = Vec::new();
        for (k, index) in indexes.into_iter().enumerate() {
            let place = match (&config.work_dir, disk.as_mut()) {
                (Some(dir), Some(disk)) if streamed => {
                    Some(StreamedIn { dir: dir.as_path(), disk, resume: resume.as_ref().map(|r| &r.works[k]) })
                }
                _ => None,
            };
            let readers = value_readers(index.material, max_per_side);
            works.push(Work::new(index, place, width, readers)?);
        }
        if !streamed {
            keep_move_lists(&moves, &mut works, config.budget_bytes.map(|b| b.saturating_sub(resident_bytes)));
        }
        if moves.mirror.is_some() {
            for work in works.iter_mut() {
                work.solved = Some(SolvedPlacements::new(&work.index, &work.planes));
            }
        }
        if !streamed {
            for work in works.iter_mut() {
                work.open = Some(match &work.solved {
                    Some(solved) => solved.flags().copy(),
                    None => {
                        let (elements, block) = work.placement_flags_shape();
                        PlacementFlags::all_set(elements, block)
                    }
                });
            }
        }
        let layouts = works.iter().map(|w| w.index.layouts()).sum();
        let resumed_at_plies = resume.as_ref().map(|r| r.depth_plies);
        let spent_before = Duration::from_millis(resume.as_ref().map_or(0, |r| r.spent_ms));
        let started = Instant::now();
        progress(Progress::MaterialStarted { materials: pair, layouts, streamed, resumed_at_plies, spent_before });
        // Resident pairs hold their captured materials in memory too;
        // streamed ones unpack them a slice at a time.
        // (at the pair's width: a material in bytes that a pair in words
        // captures into is widened for it).
        let mut loaded: Vec<Option<(LaneLayout, AlignedBuf)>> = Vec::new();
        for &m in &members {
            let load = |c: &&FinishedMaterial| !streamed && (c.width != width || c.is_packed());
            loaded.push(captured_of(m).filter(load).map(|c| c.loaded(width, &mut io)).transpose()?);
        }
        let captured: Vec<Option<Captured>> = members
            .iter()
            .zip(&loaded)
            .map(|(&m, loaded)| {
                captured_of(m).map(|c| match (&c.values, loaded) {
                    (_, Some((layout, buffer))) => Captured {
                        index: &c.index,
                        layout,
                        values: CapturedValues::Resident(&buffer.bytes()[..layout.total_bytes() as usize]),
                    },
                    (FinishedValues::Resident(bytes), None) => {
                        Captured { index: &c.index, layout: &c.values_layout, values: CapturedValues::Resident(bytes) }
                    }
                    (FinishedValues::Packed(packed), None) => {
                        Captured { index: &c.index, layout: &c.values_layout, values: CapturedValues::Packed(packed) }
                    }
                })
            })
            .collect();
        let finished: Vec<Option<&FinishedMaterial>> = members.iter().map(|&m| captured_of(m)).collect();
        let window_budget = (config.budget_bytes, config.reserved_bytes, io_block * IO_BLOCKS as u64);
        // (A resumed pair is past initialisation: no captured slice.)
        let captured_slices = if resume.is_some() { &[][..] } else { &finished[..] };
        let mut window = streamed.then(|| streamed_window(&works, captured_slices, window_budget)).transpose()?;
        // Widened, a streamed pair's finishing loads a group's values whole:
        // it keeps its window if the value buffer holds the largest group's
        // words, else one is made again for words (initialisation, and its
        // captured slice, are over by then).
        let words_window = |works: &[Work]| streamed_window(works, &[], window_budget);
        let keeps_window = window.as_ref().is_some_and(|w| w.value_capacity() >= largest_word_segment(&works));
        let needed_budget_bytes = match (streamed, keeps_window) {
            (true, true) => 0,
            (true, false) => streamed_minimum(&works, &[], ValueWidth::Word).first_stage() + window_budget.2,
            (false, _) => in_memory_bytes,
        };
        let words_held = config.budget_bytes.is_none_or(|b| b >= needed_budget_bytes);
        let widening = match config.value_width {
            None if words_held => Widening::InPlace {
                drop_move_lists: !streamed && config.budget_bytes.is_some(),
                window: (streamed && !keeps_window).then_some(&words_window as &WindowMaker),
            },
            _ => Widening::Refused { needed_budget_bytes },
        };
        let streaming = window.as_mut().zip(disk.as_mut());
        let checkpoints = checkpoint.as_mut().filter(|_| streamed).map(|checkpoint| PairCheckpoints {
            checkpoint,
            every: config.checkpoint_every,
            last: Instant::now(),
            started,
            spent_before,
        });
        // A run that chooses the width keeps words only where they are
        // needed: a material in words whose values all fit a byte is
        // finished in bytes (`finish`), so each shard is the same whichever
        // way the run got there.
        let widths = (widening, config.value_width.is_none());
        solve_pair(rules, &moves, &mut works, &captured, streaming, resume.as_ref(), checkpoints, widths, progress)?;
        if let Some(window) = &window {
            io.bytes_read += window.io.bytes_read;
            io.bytes_written += window.io.bytes_written;
            streamed_pairs += 1;
        }
        drop(window);
        drop(captured);
        drop(loaded);
        for mut work in works {
            let material = work.index.material;
            // Only the values live on: the budget counted the planes and
            // the move lists, not a second copy of the values beside them.
            (work.kept, work.fresh_placements) = (None, None);
            let Work { index, values: layout, width, storage, readers, .. } = work;
            let finished = match (&config.work_dir, storage) {
                (None, Storage::Resident(lanes)) => FinishedValues::Resident(lanes.into_values()),
                (Some(dir), Storage::Resident(lanes)) => {
                    let values = lanes.into_values();
                    let mut packer = PackedWriter::create(dir, material, &layout, readers)?;
                    for g in 0..index.groups().len() {
                        let segment = layout.segment(g);
                        packer.put(g, &values[segment.start as usize..segment.end as usize])?;
                    }
                    drop(values);
                    let packed = packer.finish(&layout)?;
                    io.bytes_written += packed.packed_bytes(0..index.groups().len());
                    // Plane files of an earlier streamed attempt (resumed
                    // with a budget that now holds the pair) are not needed.
                    work_files::remove_planes(dir, material);
                    FinishedValues::Packed(packed)
                }
                (Some(dir), Storage::OnDisk(files)) => {
                    let disk = disk.as_mut().expect("opened for streamed pairs");
                    files.finish(dir, material, disk)?;
                    FinishedValues::Packed(PackedValues::open(&packed_values::packed_path(dir, material), &layout)?)
                }
                (None, Storage::OnDisk(_)) => unreachable!("lanes on disk need a work directory"),
            };
            solved.insert(material, FinishedMaterial { index, values_layout: layout, values: finished, width });
        }
        if let Some(cp) = &mut checkpoint {
            let spent_ms = millis(spent_before + started.elapsed());
            cp.record_finished(&members, PairTime { layouts, streamed, spent_ms })?;
        }
        release_freed_heap();
        progress(Progress::MaterialDone { materials: pair });
    }
    // A run that widened keeps words only where a byte cannot hold the
    // values: the other materials' shards are what they would be without
    // the deep ones.
    let materials = solved.into_values().collect();
    let _work_lock = checkpoint.map(Checkpoint::into_lock);
    Ok(Solved { rules: *rules, max_per_side, materials, io, streamed_pairs, pairs, _work_lock })
}

fn millis(time: Duration) -> u64 {
    u64::try_from(time.as_millis()).unwrap_or(u64::MAX)
}

/// Makes a streamed pair's window (see [`Widening`]).
type WindowMaker<'a> = dyn Fn(&[Work]) -> Result<Window, SolveError> + 'a;

/// Bytes of the largest group segment of the pair's values in words.
fn largest_word_segment(works: &[Work]) -> u64 {
    let largest = |w: &Work| {
        let words = w.values_at(ValueWidth::Word);
        (0..w.index.groups().len()).map(|g| window::padded_len(&words, g)).max().unwrap_or(0)
    };
    works.iter().map(largest).max().unwrap_or(0)
}

/// The window a streamed pair (its materials `works`, capturing into
/// `captured`) is solved in, for `(budget, reserved, io)`: the budget
/// (None: the smallest window), what the caller keeps of it for itself
/// where it can, and the I/O blocks'. Two windows and slice buffers if the
/// budget holds them, so reading overlaps computing; one otherwise (the
/// second slice buffer only ever holds landing slices). Refused, naming
/// the minimum, if the budget holds no window.
fn streamed_window(
    works: &[Work],
    captured: &[Option<&FinishedMaterial>],
    (budget, reserved, io_bytes): (Option<u64>, u64, u64),
) -> Result<Window, SolveError> {
    let width = works[0].width;
    let needs = streamed_minimum(works, captured, width);
    let minimum = needs.first_stage() + io_bytes;
    let budget = budget.unwrap_or(minimum);
    if budget < minimum {
        return Err(SolveError::BudgetTooSmall { budget_bytes: budget, minimum_bytes: minimum });
    }
    let two = minimum + needs.second_stage();
    let (stages, fixed) = if budget >= two { (2, two) } else { (1, minimum) };
    // Share what is left over (less what the caller keeps for itself, out
    // of what is left) between the windows' buffers, 4 bytes per layout for
    // each plane (four lanes and the due states) and 30 or 60 for the
    // values.
    let left = budget - fixed - reserved.min(budget - fixed);
    let layout_bytes = (CARD_STATES * width.bytes()) as u64;
    let spare = left / stages / (WINDOW_PLANES * 4 + layout_bytes);
    let align = |b: u64| b / SEGMENT_ALIGN_BYTES * SEGMENT_ALIGN_BYTES;
    let plane_bytes = needs.plane + align(spare * 4);
    let value_bytes = needs.value + align(spare * layout_bytes);
    let slices = [needs.landing_slice.max(needs.captured_slice), needs.landing_slice];
    let material = works[0].index.material;
    let block_words = (material.mover * material.opponent) as usize;
    Window::new(&slices[..stages as usize], plane_bytes, value_bytes, block_words)
}

/// Lists every placement's quiet moves of a resident pair once, for all its
/// steps, if the lists fit in `spare_bytes` (None: no budget). Without them
/// the steps list the moves at every visit: slower, the same table.
fn keep_move_lists(moves: &MoveTable, works: &mut [Work], spare_bytes: Option<u64>) {
    let Some(counted) = works.iter().map(|work| CountedMoves::new(moves, &work.index)).collect::<Option<Vec<_>>>()
    else {
        return;
    };
    if !works.iter().all(|work| move_lists::fits_kept_offsets(&work.planes)) {
        return;
    }
    // Fresh flags: (plane lane elements, words per block) per material.
    let flags: Vec<(usize, usize)> = works.iter().map(Work::placement_flags_shape).collect();
    let need: u64 = counted.iter().map(CountedMoves::list_bytes).sum::<u64>()
        + flags.iter().map(|&(elements, block)| PlacementFlags::bytes(elements, block)).sum::<u64>();
    if spare_bytes.is_some_and(|spare| spare < need) {
        return;
    }
    let lists: Vec<MoveLists> = counted
        .into_iter()
        .enumerate()
        .map(|(k, counted)| {
            // Quiet moves land in the mirror (in itself if symmetric).
            let target = &works[works.len() - 1 - k];
            MoveLists::new(moves, &works[k].index, (&target.index, &target.planes), counted)
        })
        .collect();
    for ((work, lists), (elements, block)) in works.iter_mut().zip(lists).zip(flags) {
        work.kept = Some(lists);
        work.fresh_placements = Some(PlacementFlags::all_set(elements, block));
    }
}

/// Unpacks the groups `groups` (increasing) of a packed material into
/// `into`, which holds the lane from byte `start` on (each group at its
/// segment's place; the bytes between them are left as they are), in
/// parallel.
fn unpack_groups(
    packed: &PackedValues,
    layout: &LaneLayout,
    (groups, start): (&[usize], u64),
    into: &mut [u8],
) -> Result<(), SolveError> {
    debug_assert!(groups.is_sorted_by(|a, b| a < b), "distinct groups in lane order");
    let segments = carve_mut(
        into,
        groups.iter().map(|&g| {
            let segment = layout.segment(g);
            (segment.start - start) as usize..(segment.end - start) as usize
        }),
    );
    groups.par_iter().zip(segments).try_for_each(|(&g, into)| packed.read_group(g, into))?;
    Ok(())
}

/// Hands the heap memory that a pair freed back to the system. glibc's
/// malloc keeps freed heap memory resident while a live chunk lies above
/// it, and after freeing a mapped chunk serves buffers up to that size
/// (32 MiB at most) from the heap: 198 MB held from 8 men's resident pairs
/// on cost that run 140 MB of peak RSS (docs/BENCHMARKS.md, session 54).
/// Only free memory is released; a process-wide malloc setting would be
/// the binary's to make, not the library's.
fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the system and is
    // safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Removes what a run left in its work directory (packed values and the
/// checkpoint), once the table is safely written elsewhere; the directory
/// itself goes too if nothing else is in it.
pub fn remove_work_files(dir: &Path, solved: &Solved) -> std::io::Result<()> {
    for finished in &solved.materials {
        packed_values::remove(dir, finished.material())?;
    }
    checkpoint::remove(dir)?;
    let _ = std::fs::remove_dir(dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{CardSet, NoMoveRule};
    use crate::value::{MAX_LOSS_PLIES, widen, word_at};
    use std::sync::Mutex;

    /// Every finished material's values as value words (bytes widened), in
    /// layout order, and its width.
    fn words_of(solved: &Solved) -> Vec<(Material, ValueWidth, Vec<u16>)> {
        let words = |finished: &FinishedMaterial| {
            let mut words = Vec::new();
            finished
                .for_each_chunk(UNPACK_BATCH_BYTES_DEFAULT, |chunk| {
                    match finished.width() {
                        ValueWidth::Byte => words.extend(chunk.iter().map(|&byte| widen(byte))),
                        ValueWidth::Word => words.extend((0..chunk.len() / 2).map(|k| word_at(chunk, k))),
                    }
                    Ok::<_, SolveError>(())
                })
                .unwrap();
            words
        };
        solved.materials.iter().map(|f| (f.material(), f.width(), words(f))).collect()
    }

    /// Solved with value words, a table is its value bytes widened, for
    /// card sets with and without a mirror, with the mirror's steps and
    /// without, under both rules (the word kernels' own checks: the fold,
    /// the events, the due captures, the images' values).
    #[test]
    fn value_words_are_the_bytes_widened() {
        let sets =
            [("Boar,Ox,Elephant,Horse,Crab", NoMoveRule::Pass), ("Boar,Cobra,Crab,Dragon,Tiger", NoMoveRule::Loss)];
        for (names, no_move) in sets {
            let names: Vec<&str> = names.split(',').collect();
            let rules = Rules { cards: CardSet::from_names(&names).unwrap(), no_move };
            for mirror in [true, false] {
                let config = SolveConfig { mirror, ..SolveConfig::default() };
                let bytes = solve_with(&rules, 2, &config, &|_| {}).unwrap();
                let wide = SolveConfig { value_width: Some(ValueWidth::Word), ..config.clone() };
                let words = solve_with(&rules, 2, &wide, &|_| {}).unwrap();
                // Streamed in words too (every pair through the work
                // directory, in windows of a few groups).
                let dir = tempfile::tempdir().unwrap();
                let streamed = SolveConfig {
                    work_dir: Some(dir.path().join("w")),
                    budget_bytes: Some(64 << 20),
                    force_streamed: true,
                    ..wide
                };
                let streamed_words = solve_with(&rules, 2, &streamed, &|_| {}).unwrap();
                assert_eq!(streamed_words.streamed_pairs, streamed_words.pairs);
                let (bytes, words, streamed_words) = (words_of(&bytes), words_of(&words), words_of(&streamed_words));
                assert!(bytes.iter().all(|(_, width, _)| *width == ValueWidth::Byte));
                assert!(words.iter().chain(&streamed_words).all(|(_, width, _)| *width == ValueWidth::Word));
                let strip = |all: Vec<(Material, ValueWidth, Vec<u16>)>| -> Vec<(Material, Vec<u16>)> {
                    all.into_iter().map(|(m, _, words)| (m, words)).collect()
                };
                let bytes = strip(bytes);
                assert!(bytes == strip(words), "{names:?} {no_move:?}, mirror {mirror}");
                assert!(bytes == strip(streamed_words), "streamed: {names:?} {no_move:?}, mirror {mirror}");
            }
        }
    }

    /// Cobra,Eel,Goose,Mantis,Rooster's 2v2 loses in up to 292 plies
    /// (the reference solver; README, "Limits"): a run in memory finds
    /// that a byte cannot hold it, says so, and solves 2v2 on from there in
    /// value words, the materials before it widened: the table solved in words
    /// throughout, with or without the mirror's steps, but with words only
    /// where bytes do not hold the values. A run with a work directory
    /// does the same, 2v2 in memory or streamed, and reopens 2v2's packed
    /// words when resumed; a 2v2 whose budget cannot hold it in words (its
    /// lanes in memory, its window streamed) is refused, naming a budget
    /// that can.
    #[test]
    fn a_table_too_deep_for_bytes_is_solved_in_words() {
        let names = ["Cobra", "Eel", "Goose", "Mantis", "Rooster"];
        let rules = Rules { cards: CardSet::from_names(&names).unwrap(), no_move: NoMoveRule::Pass };
        let widened = Mutex::new(Vec::new());
        let progress = |p: Progress| {
            if let Progress::Widened { material } = p {
                widened.lock().unwrap().push(material);
            }
        };
        let solved = words_of(&solve_with(&rules, 2, &SolveConfig::default(), &progress).unwrap());
        assert_eq!(*widened.lock().unwrap(), [Material::new(2, 2)]);
        let words: Vec<Material> =
            (solved.iter()).filter(|(_, width, _)| *width == ValueWidth::Word).map(|s| s.0).collect();
        assert_eq!(words, [Material::new(2, 2)]);
        let deepest_loss = |words: &[u16]| {
            words.iter().filter_map(|&w| Value::from_word(w)).filter(|v| v.is_loss()).filter_map(Value::plies).max()
        };
        let (_, _, two_two) = solved.iter().find(|(m, _, _)| *m == Material::new(2, 2)).unwrap();
        assert!(deepest_loss(two_two).unwrap() > MAX_LOSS_PLIES, "{:?}", deepest_loss(two_two));

        let values = |all: Vec<(Material, ValueWidth, Vec<u16>)>| -> Vec<(Material, Vec<u16>)> {
            all.into_iter().map(|(m, _, words)| (m, words)).collect()
        };
        let solved = values(solved);
        for mirror in [true, false] {
            let words = SolveConfig { mirror, value_width: Some(ValueWidth::Word), ..SolveConfig::default() };
            assert!(values(words_of(&solve_with(&rules, 2, &words, &|_| {}).unwrap())) == solved, "mirror {mirror}");
        }

        let dir = tempfile::tempdir().unwrap();
        let two_two = pairs_up_to(2).into_iter().find(|p| p.members == [Material::new(2, 2)]).unwrap();
        let in_memory_bytes = two_two.resident_word_bytes;
        for budget_bytes in [None, Some(in_memory_bytes)] {
            let _ = std::fs::remove_dir_all(dir.path().join("w"));
            let config = SolveConfig { work_dir: Some(dir.path().join("w")), budget_bytes, ..SolveConfig::default() };
            let through_disk = solve_with(&rules, 2, &config, &|_| {}).unwrap();
            assert_eq!(through_disk.streamed_pairs, 0);
            assert!(
                words_of(&through_disk) == words_of(&solve_with(&rules, 2, &SolveConfig::default(), &|_| {}).unwrap())
            );
            drop(through_disk);
            let resumed = solve_with(&rules, 2, &SolveConfig { resume: true, ..config }, &|_| {}).unwrap();
            let widths: Vec<(Material, ValueWidth)> = words_of(&resumed).into_iter().map(|(m, w, _)| (m, w)).collect();
            assert_eq!(widths.iter().filter(|(_, w)| *w == ValueWidth::Word).count(), 1, "{widths:?}");
            assert!(values(words_of(&resumed)) == solved, "{budget_bytes:?}");
        }
        // Streamed, 2v2 goes on in words where it stands too.
        let _ = std::fs::remove_dir_all(dir.path().join("w"));
        let streamed = SolveConfig {
            work_dir: Some(dir.path().join("w")),
            budget_bytes: Some(64 << 20),
            force_streamed: true,
            ..SolveConfig::default()
        };
        let widened = Mutex::new(Vec::new());
        let progress = |p: Progress| {
            if let Progress::Widened { material } = p {
                widened.lock().unwrap().push(material);
            }
        };
        let through_disk = solve_with(&rules, 2, &streamed, &progress).unwrap();
        assert_eq!(*widened.lock().unwrap(), [Material::new(2, 2)]);
        assert_eq!(through_disk.streamed_pairs, through_disk.pairs);
        assert!(values(words_of(&through_disk)) == solved, "streamed");
        drop(through_disk);
        let _ = std::fs::remove_dir_all(dir.path().join("w"));
        // Streamed in the smallest budget, which holds no window in words:
        // refused, naming a budget that does, which then gives the same
        // table.
        let smallest = |budget_bytes| SolveConfig { budget_bytes: Some(budget_bytes), ..streamed.clone() };
        let minimum = match solve_with(&rules, 2, &smallest(4096), &|_| {}) {
            Err(SolveError::BudgetTooSmall { minimum_bytes, .. }) => minimum_bytes,
            other => panic!("{:?}", other.map(|_| ())),
        };
        let _ = std::fs::remove_dir_all(dir.path().join("w"));
        let needed = match solve_with(&rules, 2, &smallest(minimum), &|_| {}) {
            Err(SolveError::TooDeep { material, needed_budget_bytes }) if material == Material::new(2, 2) => {
                needed_budget_bytes
            }
            other => panic!("{:?}", other.map(|_| ())),
        };
        assert!(needed > minimum);
        let _ = std::fs::remove_dir_all(dir.path().join("w"));
        let enough = solve_with(&rules, 2, &smallest(needed), &|_| {}).unwrap();
        assert_eq!(enough.streamed_pairs, enough.pairs);
        assert!(values(words_of(&enough)) == solved, "streamed in the budget named");
        drop(enough);
        // Resident in a budget that holds 2v2's bytes but not its words, it
        // is refused, with the budget that holds them.
        let _ = std::fs::remove_dir_all(dir.path().join("w"));
        let tight = SolveConfig { budget_bytes: Some(in_memory_bytes - 1), force_streamed: false, ..streamed };
        match solve_with(&rules, 2, &tight, &|_| {}) {
            Err(SolveError::TooDeep { material, needed_budget_bytes }) => {
                assert_eq!((material, needed_budget_bytes), (Material::new(2, 2), in_memory_bytes))
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }

    /// A finished material loaded for a pair in words is its bytes widened,
    /// from memory or from its packed values.
    #[test]
    fn captured_bytes_load_widened() {
        let rules = Rules { cards: CardSet::default_set(), no_move: NoMoveRule::Pass };
        let dir = tempfile::tempdir().unwrap();
        let config = SolveConfig { work_dir: Some(dir.path().join("w")), ..SolveConfig::default() };
        for solved in [solve_with(&rules, 2, &SolveConfig::default(), &|_| {}), solve_with(&rules, 2, &config, &|_| {})]
        {
            for finished in solved.unwrap().materials.iter().filter(|f| f.width() == ValueWidth::Byte) {
                let (bytes, words) = (&finished.values_layout, LaneLayout::new(&finished.index, 60));
                let mut io = IoTotals::default();
                let (layout, loaded) = finished.loaded(ValueWidth::Word, &mut io).unwrap();
                assert_eq!(layout.total_bytes(), words.total_bytes());
                assert_eq!(io.bytes_read > 0, finished.is_packed());
                for g in 0..finished.index.groups().len() {
                    let (from, to) = (bytes.segment(g), words.segment(g));
                    let mut expected = vec![0; (to.end - to.start) as usize];
                    let mut own = vec![0; (from.end - from.start) as usize];
                    match &finished.values {
                        FinishedValues::Resident(values) => {
                            own.copy_from_slice(&values[from.start as usize..from.end as usize])
                        }
                        FinishedValues::Packed(packed) => packed.read_group(g, &mut own).unwrap(),
                    }
                    widen_segment(&own, &mut expected);
                    assert!(
                        loaded.bytes()[to.start as usize..to.end as usize] == expected[..],
                        "{} group {g}",
                        finished.material()
                    );
                }
            }
        }
    }

    /// Widening a value lane in its own vector gives the lane that widening
    /// it into a new one gives, padding zero.
    #[test]
    fn a_value_lane_widens_in_place() {
        let index = MaterialIndex::new(Material::new(2, 3));
        let bytes = LaneLayout::new(&index, CARD_STATES as u64);
        let words = LaneLayout::new(&index, 2 * CARD_STATES as u64);
        let mut lane: Vec<u8> = (0..bytes.total_bytes()).map(|i| ((i * 2_654_435_761) >> 7) as u8).collect();
        let widen = |bytes: &[u8], words: &mut [u8]| {
            widen_segment(bytes, words);
            true
        };
        let (_, expected) = relaid_values(&index, &bytes, &lane, ValueWidth::Word, widen).unwrap();
        widen_in_place(&mut lane, &bytes, &words);
        assert!(lane == expected);
    }

    /// Every unit runs once with its own slice; results come back in the
    /// order of the units; and a single worker runs them opponent slice by
    /// opponent slice, in unit order within a slice.
    #[test]
    fn units_run_in_landing_order_and_report_in_unit_order() {
        let index = MaterialIndex::new(Material::new(2, 3));
        let groups: Vec<usize> = (0..index.groups().len()).collect();
        let units = units_of(&index, &groups);
        assert!(units.len() > 100);
        let slices: Vec<usize> = (0..units.len()).collect();
        let ran = Mutex::new(Vec::new());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let results = pool.install(|| {
            in_landing_order(&index, &units, slices, |unit, k| {
                ran.lock().unwrap().push(k);
                (unit, k)
            })
        });
        assert_eq!(results, units.iter().copied().zip(0..).collect::<Vec<_>>());
        let ran = ran.into_inner().unwrap();
        let key = |k: usize| (index.groups()[units[k].0].opponent_counts, k);
        assert!(ran.windows(2).all(|w| key(w[0]) < key(w[1])), "opponent slice by opponent slice");
        assert_eq!(ran.len(), units.len());
    }
}

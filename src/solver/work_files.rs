//! The work files of one streamed material, and which file holds each
//! group's current segment of each plane lane; and, before a run, the
//! estimate of the disk its work directory will need ([`work_disk_outlook`]).
//!
//! Owns the two-slot scheme that makes a checkpoint after any step cheap and
//! safe: every plane lane has two files (slots 0 and 1). A checkpoint
//! records, per group and plane lane, the slot that held the segment when it
//! was taken (the *kept* slot); until the next checkpoint every write of
//! that segment goes to the other slot. So the planes a checkpoint names are
//! never overwritten while it is the latest, and nothing is copied to take
//! one. Once a newer checkpoint is durable, the segments the older one named
//! and the newer does not are *stale*. A dense plane's next write of the
//! segment goes over all of it, so its stale segments are left in place
//! for that write and only punched out of their files at the checkpoint
//! after, if no write came; a sparse lane's records cover only part of
//! the segment, so its stale segments are punched out at once. A plane
//! segment of zeros is stored as a hole. So the planes take
//! about one copy of disk plus what was written since the last checkpoint
//! plus what the one before wrote and nothing has rewritten, not two
//! copies.
//! Values have no work file while the pair is solved: steps append what
//! they decide to the material's decision log (`decision_log`), which a
//! checkpoint records by its length, and finishing packs the values from
//! the planes and the log (`packed_values`). Knows nothing of moves or
//! steps.

use super::PairPlan;
use super::capture_schedule::{self, CaptureSchedule};
use super::decision_log::{self, DecisionLog, LogMark};
use super::disk::{DiskError, DiskIo, LaneFile, Punched, slot_path};
use super::lanes::{Lane, LaneLayout};
use crate::blockio::FileId;
use crate::index::Material;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

/// The plane lanes stored in work files, in slot-bit order: bit `i` of a
/// group's slot byte is the slot of lane `STORED_PLANES[i]`. (`fresh` is
/// not stored: the decision log holds it, see `decision_log`.) The sparse
/// lanes hold records of the groups that turned sparse (`sparse`), laid
/// out like a plane.
pub(super) const STORED_PLANES: [Lane; 5] = [Lane::Won, Lane::Lost, Lane::Capture, Lane::SparseWon, Lane::SparseRest];

/// Every plane lane's bit of a slot byte.
const ALL_SLOT_BITS: u8 = (1 << STORED_PLANES.len()) - 1;

/// The bits of the dense plane lanes (the first three of
/// [`STORED_PLANES`]), whose writes always cover the whole segment (or,
/// compacted, the same prefix of it every time: `compact`); the sparse
/// lanes' records cover a prefix of it that changes.
const DENSE_SLOT_BITS: u8 = 0b111;

fn plane_bit(lane: Lane) -> u8 {
    let i = STORED_PLANES.iter().position(|&l| l == lane).expect("a plane lane");
    1 << i
}

/// Peak work-directory disk per layout of a run's largest streamed pair:
/// an estimate, to tell a user before a long run whether its disk will do.
/// Measured peaks (everything the directory held at once: both slots of
/// the planes, the decision log, the capture schedule, the finished
/// materials' packed values) were 30.3-32.0 bytes per layout at 8 men under
/// 1 GiB (4v4's 1,211,364,000 layouts, 36.7-38.8 GB, sessions 54-57), 33.6
/// since the log and schedule frames are packed at zstd level -1 (40.67
/// GB, session 72), and 23.9 at 6 men under 32 MiB (3v3's 31,878,000
/// layouts, 0.762 GB, `scripts/work-disk.sh 6 32MiB`, session 57;
/// docs/BENCHMARKS.md); the higher figure, rounded up with a byte to
/// spare, so the estimate errs on the side of too much.
pub const WORK_DISK_BYTES_PER_LAYOUT: u64 = 35;

/// A run's work-directory disk, before it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkDiskOutlook {
    /// The estimated peak ([`WORK_DISK_BYTES_PER_LAYOUT`]).
    pub needed_bytes: u64,
    /// Free on the disk, plus what the directory holds already (a
    /// resumed run's files are part of its peak).
    pub available_bytes: u64,
}

/// The outlook of a run planning `pairs` in `dir`; None if no pair is
/// streamed (resident pairs leave only packed values there) or the system
/// does not say what is free.
pub fn work_disk_outlook(dir: &Path, pairs: &[PairPlan]) -> Option<WorkDiskOutlook> {
    let largest = pairs.iter().filter(|p| p.streamed).map(|p| p.layouts).max()?;
    let free = crate::blockio::available_bytes(dir)?;
    Some(WorkDiskOutlook {
        needed_bytes: largest.saturating_mul(WORK_DISK_BYTES_PER_LAYOUT),
        available_bytes: free.saturating_add(directory_bytes(dir)),
    })
}

/// Disk the files directly in `dir` take (allocated blocks: a sparse
/// file counts what it holds); 0 for what cannot be read.
fn directory_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.filter_map(|e| e.ok()?.metadata().ok()).filter(|m| m.is_file()).map(|m| m.blocks() * 512).sum()
}

/// The files of one material being solved streamed.
pub(super) struct MaterialFiles {
    /// Per plane lane (in [`STORED_PLANES`] order), the files of slots 0 and 1.
    planes: Vec<[(LaneFile, FileId); 2]>,
    /// Per group, the slot of each plane lane holding its current segment.
    /// Atomic only so that writes can go through `&self` (a step holds the
    /// material shared while it stores); one thread stores at a time.
    live: Vec<AtomicU8>,
    /// Per group, the slots the latest checkpoint names (never written).
    kept: Vec<u8>,
    /// Per group, the plane lanes whose other slot (not the kept one)
    /// holds a segment nothing needs: the checkpoint before named it, and
    /// it has not been written since. Atomic as `live` is.
    stale: Vec<AtomicU8>,
    /// The steps' decisions. Behind a lock only so that a step can append
    /// through `&self`; one thread appends at a time.
    log: Mutex<DecisionLog>,
    /// Which states' capture values fall due when (written by
    /// initialisation, read by steps).
    schedule: CaptureSchedule,
    /// Where each group's segment lies in a plane file.
    plane_layout: LaneLayout,
    /// The work directory.
    dir: PathBuf,
}

/// The name of a material's decision log.
pub(super) fn log_path(dir: &Path, material: Material) -> PathBuf {
    dir.join(format!("{material}.decisions"))
}

impl MaterialFiles {
    /// Creates the material's files, zeroed (a fresh start of the pair).
    pub fn create(
        dir: &Path,
        material: Material,
        planes: &LaneLayout,
        groups: usize,
        disk: &mut DiskIo,
    ) -> Result<MaterialFiles, DiskError> {
        let buffer_bytes = decision_log::buffer_bytes(disk.block_bytes());
        let log = DecisionLog::create(&log_path(dir, material), groups, buffer_bytes)?;
        let schedule = CaptureSchedule::create(dir, material, groups)?;
        MaterialFiles::open(dir, material, planes, vec![0; groups], (log, schedule, true), disk)
    }

    /// Opens the files a checkpoint names, with its slot bytes (one per
    /// group) and the mark of the decision log.
    pub fn reopen(
        dir: &Path,
        material: Material,
        planes: &LaneLayout,
        kept: Vec<u8>,
        mark: LogMark,
        disk: &mut DiskIo,
    ) -> Result<MaterialFiles, DiskError> {
        let buffer_bytes = decision_log::buffer_bytes(disk.block_bytes());
        let log = DecisionLog::reopen(&log_path(dir, material), mark, kept.len(), buffer_bytes)?;
        let schedule = CaptureSchedule::reopen(dir, material, kept.len())?;
        MaterialFiles::open(dir, material, planes, kept, (log, schedule, false), disk)
    }

    fn open(
        dir: &Path,
        material: Material,
        plane_layout: &LaneLayout,
        kept: Vec<u8>,
        (log, schedule, create): (DecisionLog, CaptureSchedule, bool),
        disk: &mut DiskIo,
    ) -> Result<MaterialFiles, DiskError> {
        let mut open = |path: &Path, bytes: u64| -> Result<(LaneFile, FileId), DiskError> {
            let file = LaneFile::open(path, create, bytes)?;
            let id = disk.open(&file)?;
            Ok((file, id))
        };
        let mut planes = Vec::with_capacity(STORED_PLANES.len());
        for lane in STORED_PLANES {
            let bytes = plane_layout.total_bytes();
            planes.push([
                open(&slot_path(dir, material, lane, 0), bytes)?,
                open(&slot_path(dir, material, lane, 1), bytes)?,
            ]);
        }
        let live = kept.iter().map(|&slots| AtomicU8::new(slots)).collect();
        // What the run before wrote after its last checkpoint (or had not
        // punched yet) is of no use now: stale, like what the checkpoint
        // before the last named (the sparse lanes' is punched below).
        let stale_bits = if create { 0 } else { DENSE_SLOT_BITS };
        let stale = kept.iter().map(|_| AtomicU8::new(stale_bits)).collect();
        let files = MaterialFiles {
            planes,
            live,
            kept,
            stale,
            log: Mutex::new(log),
            schedule,
            plane_layout: plane_layout.clone(),
            dir: dir.to_path_buf(),
        };
        if !create {
            files.punch(|g| (ALL_SLOT_BITS & !DENSE_SLOT_BITS, files.unnamed(g)))?;
        }
        Ok(files)
    }

    /// Group `g`'s slot bits the latest checkpoint does not name: where
    /// writes go, and stale segments lie.
    fn unnamed(&self, g: usize) -> u8 {
        self.kept[g] ^ ALL_SLOT_BITS
    }

    /// Punches out, per group, the segments of the plane lanes whose bits
    /// `slots_of(g)` gives, from the slot each bit names.
    fn punch(&self, slots_of: impl Fn(usize) -> (u8, u8)) -> Result<(), DiskError> {
        for (i, files) in self.planes.iter().enumerate() {
            let bit = 1u8 << i;
            // Consecutive groups' segments are adjacent: one call per run.
            let mut runs: [Option<std::ops::Range<u64>>; 2] = [None, None];
            for g in 0..self.kept.len() {
                let (lanes, slots) = slots_of(g);
                if lanes & bit == 0 {
                    continue;
                }
                let slot = (slots & bit != 0) as usize;
                let span = self.plane_layout.span(g..g + 1);
                match &mut runs[slot] {
                    Some(run) if run.end == span.start => run.end = span.end,
                    run => {
                        if let Some(done) = run.replace(span) {
                            files[slot].0.punch(done)?;
                        }
                    }
                }
            }
            for (slot, run) in runs.into_iter().enumerate() {
                if let Some(run) = run {
                    files[slot].0.punch(run)?;
                }
            }
        }
        Ok(())
    }

    /// The file to read group `g`'s segment of `lane` from.
    pub fn read_file(&self, lane: Lane, g: usize) -> FileId {
        debug_assert_ne!(lane, Lane::Values, "values have no work file");
        let slot = self.live[g].load(Ordering::Relaxed) & plane_bit(lane) != 0;
        self.planes[plane_bit(lane).trailing_zeros() as usize][slot as usize].1
    }

    /// The file to write group `g`'s segment of `lane` to: the slot the
    /// latest checkpoint does not name, which becomes the live one. A
    /// dense lane's write covers the whole segment, so it goes over a
    /// stale segment there; a sparse lane's slot was punched out when it
    /// turned stale.
    pub fn write_file(&self, lane: Lane, g: usize) -> FileId {
        debug_assert_ne!(lane, Lane::Values, "values have no work file");
        let bit = plane_bit(lane);
        let slot = (self.kept[g] & bit) ^ bit;
        let live = &self.live[g];
        live.store((live.load(Ordering::Relaxed) & !bit) | slot, Ordering::Relaxed);
        self.stale[g].fetch_and(!bit, Ordering::Relaxed);
        self.planes[bit.trailing_zeros() as usize][(slot != 0) as usize].1
    }

    /// The error for damaged records in group `g`'s segment of `lane`.
    pub fn damaged(&self, lane: Lane, g: usize, what: &'static str) -> DiskError {
        let slot = self.live[g].load(Ordering::Relaxed) & plane_bit(lane) != 0;
        let path = self.planes[plane_bit(lane).trailing_zeros() as usize][slot as usize].0.path().to_path_buf();
        DiskError::Damaged { path, what }
    }

    /// The work directory the files are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn schedule(&self) -> &CaptureSchedule {
        &self.schedule
    }

    pub fn schedule_mut(&mut self) -> &mut CaptureSchedule {
        &mut self.schedule
    }

    /// The decision log, to append to or apply.
    pub fn log(&self) -> std::sync::MutexGuard<'_, DecisionLog> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Syncs every file (writes drained first) and returns the slot bytes
    /// and log mark a checkpoint taken now must name. Call
    /// [`MaterialFiles::keep`] with the slots once the checkpoint is durable.
    pub fn sync(&self, disk: &mut DiskIo) -> Result<(Vec<u8>, LogMark), DiskError> {
        for slots in &self.planes {
            for (_, id) in slots {
                disk.sync(*id)?;
            }
        }
        let mark = self.log().sync()?;
        Ok((self.live.iter().map(|slots| slots.load(Ordering::Relaxed)).collect(), mark))
    }

    /// The checkpoint naming `slots` is durable: from now on writes must
    /// spare those, the segments only the checkpoint before named are
    /// stale, and the ones stale before that no write went over are freed.
    pub fn keep(&mut self, slots: Vec<u8>) -> Result<(), DiskError> {
        debug_assert_eq!(slots.len(), self.kept.len());
        let old = std::mem::replace(&mut self.kept, slots);
        // A segment stale since the checkpoint before was not written
        // since (a write clears the bit), so its kept slot did not move;
        // the sparse lanes' segments are punched at once.
        self.punch(|g| {
            let stale = self.stale[g].load(Ordering::Relaxed);
            debug_assert_eq!(stale & (old[g] ^ self.kept[g]), 0);
            let sparse = (old[g] ^ self.kept[g]) & !DENSE_SLOT_BITS;
            // Both kinds lie in the slot the latest checkpoint does not name.
            (stale | sparse, self.unnamed(g))
        })?;
        for (g, stale) in self.stale.iter().enumerate() {
            stale.store((old[g] ^ self.kept[g]) & DENSE_SLOT_BITS, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Punches out every stale segment, for a pair whose steps are over.
    fn punch_stale(&self) -> Result<(), DiskError> {
        self.punch(|g| (self.stale[g].swap(0, Ordering::Relaxed), self.unnamed(g)))
    }

    /// Stores group `g`'s segment of `lane` as zeros: as a hole in the slot
    /// [`MaterialFiles::write_file`] would pick, or, where the file system
    /// cannot punch holes, by handing back that file for the caller to
    /// write the zeros to.
    pub fn write_zeros(&self, lane: Lane, g: usize) -> Result<Option<FileId>, DiskError> {
        let file = self.write_file(lane, g);
        let bit = plane_bit(lane);
        let slot = (self.live[g].load(Ordering::Relaxed) & bit != 0) as usize;
        let (lane_file, id) = &self.planes[bit.trailing_zeros() as usize][slot];
        debug_assert_eq!(*id, file);
        match lane_file.punch(self.plane_layout.span(g..g + 1))? {
            Punched::Yes => Ok(None),
            Punched::Unsupported => Ok(Some(file)),
        }
    }

    /// The pair's steps are over and recorded so: finishing reads `won`,
    /// `lost`, the sparse records and the decision log only (a resumed run
    /// too), so `capture` and the capture schedule give their disk back
    /// now. The files
    /// stay, at their sizes, reading as zeros, so a resumed run opens them
    /// as before.
    pub fn release_for_finishing(&self) -> Result<(), DiskError> {
        self.punch_stale()?;
        for (file, _) in &self.planes[plane_bit(Lane::Capture).trailing_zeros() as usize] {
            file.punch(0..file.size_bytes()?)?;
        }
        self.schedule.release()
    }

    /// The material is finished (its values packed): forgets every file
    /// and removes them.
    pub fn finish(self, dir: &Path, material: Material, disk: &mut DiskIo) -> Result<(), DiskError> {
        disk.drain()?;
        for slots in &self.planes {
            for (_, id) in slots {
                disk.close(*id);
            }
        }
        drop(self.planes);
        remove_planes(dir, material);
        Ok(())
    }
}

/// Removes a material's plane files, both slots, and its decision log
/// (they are not needed once its values are final). Missing files are fine.
pub(super) fn remove_planes(dir: &Path, material: Material) {
    for lane in STORED_PLANES {
        for slot in 0..2 {
            let _ = std::fs::remove_file(slot_path(dir, material, lane, slot));
        }
    }
    let _ = std::fs::remove_file(log_path(dir, material));
    capture_schedule::remove(dir, material);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blockio::IoChoice;
    use crate::index::MaterialIndex;
    use crate::solver::lanes::SEGMENT_ALIGN_BYTES;

    /// The estimate follows the largest streamed pair; what is available
    /// counts the directory's own files; no streamed pair, no outlook.
    #[test]
    fn work_disk_outlook_is_the_largest_streamed_pair_against_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let plan = |layouts: u64, streamed: bool| PairPlan {
            materials: [Material::new(1, 1), Material::new(1, 1)],
            layouts,
            streamed,
        };
        assert_eq!(work_disk_outlook(dir.path(), &[plan(1 << 40, false)]), None, "resident only");
        let pairs = [plan(1000, true), plan(1 << 40, false), plan(5000, true), plan(3000, true)];
        let outlook = work_disk_outlook(dir.path(), &pairs).expect("Linux says what is free");
        assert_eq!(outlook.needed_bytes, 5000 * WORK_DISK_BYTES_PER_LAYOUT);
        let planes = dir.path().join("planes");
        std::fs::write(&planes, vec![1u8; 1 << 20]).unwrap();
        assert_eq!(directory_bytes(dir.path()), allocated_bytes(&planes));
        assert!(allocated_bytes(&planes) >= 1 << 20);
        let outlook = work_disk_outlook(dir.path(), &pairs).unwrap();
        assert!(outlook.available_bytes >= 1 << 20, "the directory's files count");
    }

    /// A material's files, created in a directory of their own, with the
    /// plane layout and a small pread `DiskIo`.
    fn created(material: Material) -> (tempfile::TempDir, LaneLayout, DiskIo, MaterialFiles) {
        let dir = tempfile::tempdir().unwrap();
        let index = MaterialIndex::new(material);
        let planes = LaneLayout::new(&index, 4);
        let mut disk = DiskIo::new(IoChoice::Pread, 64 << 10, 2).unwrap();
        let groups = index.groups().len();
        let files = MaterialFiles::create(dir.path(), material, &planes, groups, &mut disk).unwrap();
        (dir, planes, disk, files)
    }

    #[test]
    fn dense_slot_bits_are_the_dense_lanes() {
        let dense = [Lane::Won, Lane::Lost, Lane::Capture];
        assert_eq!(dense.iter().fold(0, |bits, &lane| bits | plane_bit(lane)), DENSE_SLOT_BITS);
    }

    #[test]
    fn writes_spare_the_kept_slot_until_the_next_checkpoint() {
        let material = Material::new(1, 2);
        let (dir, planes, mut disk, mut files) = created(material);
        let first = files.read_file(Lane::Won, 3);
        // Before any checkpoint, slot 0 is kept: writes go to slot 1 and
        // reads follow them; other groups and lanes stay where they were.
        let written = files.write_file(Lane::Won, 3);
        assert_ne!(written, first);
        assert_eq!(files.read_file(Lane::Won, 3), written);
        assert_eq!(files.read_file(Lane::Won, 4), first);
        assert_ne!(files.read_file(Lane::Lost, 3), written);
        assert_eq!(files.write_file(Lane::Won, 3), written, "a second write before a checkpoint reuses the slot");
        // After a checkpoint keeps slot 1, the next write goes back to slot 0.
        files.schedule_mut().seal().unwrap();
        let (slots, mark) = files.sync(&mut disk).unwrap();
        assert_eq!(slots[3], plane_bit(Lane::Won));
        files.keep(slots.clone()).unwrap();
        assert_eq!(files.read_file(Lane::Won, 3), written);
        assert_eq!(files.write_file(Lane::Won, 3), first);
        // Reopening with the kept slots reads what the checkpoint named.
        drop(files);
        let files = MaterialFiles::reopen(dir.path(), material, &planes, slots, mark, &mut disk).unwrap();
        let slot_one = files.read_file(Lane::Won, 3);
        assert_ne!(slot_one, files.read_file(Lane::Won, 4));
        remove_planes(dir.path(), material);
        assert!(!slot_path(dir.path(), material, Lane::Won, 1).exists());
    }

    #[test]
    fn a_resumed_run_frees_what_was_written_after_its_checkpoint() {
        let material = Material::new(2, 2);
        let (dir, planes, mut disk, mut files) = created(material);
        let slot0 = slot_path(dir.path(), material, Lane::Won, 0);
        let (g, span, ones) = largest_segment_of_ones(&planes);
        let len = span.end - span.start;
        disk.write(files.write_file(Lane::Won, g), span.start, ones.bytes()).unwrap();
        files.schedule_mut().seal().unwrap();
        let (slots, mark) = files.sync(&mut disk).unwrap();
        files.keep(slots.clone()).unwrap();
        // Written after the checkpoint, then the run is killed.
        disk.write(files.write_file(Lane::Won, g), span.start, ones.bytes()).unwrap();
        disk.drain().unwrap();
        drop(files);
        assert!(allocated_bytes(&slot0) >= len);
        let mut files = MaterialFiles::reopen(dir.path(), material, &planes, slots, mark, &mut disk).unwrap();
        assert!(allocated_bytes(&slot0) >= len, "left for a write to go over");
        let (slots, _) = files.sync(&mut disk).unwrap();
        files.keep(slots).unwrap();
        assert_eq!(allocated_bytes(&slot0), 0, "no write came: freed at the first checkpoint");
    }

    /// The group with the largest segment, its padded byte range, and a
    /// buffer of that many 0xff bytes to write to it.
    fn largest_segment_of_ones(planes: &LaneLayout) -> (usize, std::ops::Range<u64>, crate::solver::disk::AlignedBuf) {
        let g = (0..planes.groups()).max_by_key(|&g| planes.segment(g).end - planes.segment(g).start).unwrap();
        let span = planes.span(g..g + 1);
        let mut ones = crate::solver::disk::AlignedBuf::zeroed((span.end - span.start) as usize).unwrap();
        ones.bytes_mut().fill(0xff);
        (g, span, ones)
    }

    /// Disk a file takes (allocated blocks), not its size.
    fn allocated_bytes(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    #[test]
    fn stale_segments_are_written_over_or_freed_a_checkpoint_later() {
        let material = Material::new(2, 2);
        let (dir, planes, mut disk, mut files) = created(material);
        let (slot0, slot1) =
            (slot_path(dir.path(), material, Lane::Won, 0), slot_path(dir.path(), material, Lane::Won, 1));
        let (g, span, ones) = largest_segment_of_ones(&planes);
        let len = span.end - span.start;
        let checkpoint = |files: &mut MaterialFiles, disk: &mut DiskIo| {
            let (slots, _) = files.sync(disk).unwrap();
            files.keep(slots).unwrap();
        };
        // The first write goes to slot 1; once a checkpoint naming it is
        // durable, slot 0's copy (here never written) stays a hole and the
        // next write goes to slot 0.
        disk.write(files.write_file(Lane::Won, g), span.start, ones.bytes()).unwrap();
        files.schedule_mut().seal().unwrap();
        checkpoint(&mut files, &mut disk);
        assert!(allocated_bytes(&slot1) >= len);
        disk.write(files.write_file(Lane::Won, g), span.start, ones.bytes()).unwrap();
        let (slots, _) = files.sync(&mut disk).unwrap();
        assert!(allocated_bytes(&slot0) >= len);
        assert!(allocated_bytes(&slot1) >= len, "the durable checkpoint still names slot 1");
        files.keep(slots).unwrap();
        // Slot 1's copy is stale: the next write goes over it.
        assert!(allocated_bytes(&slot1) >= len, "a stale segment is left for the next write");
        disk.write(files.write_file(Lane::Won, g), span.start, ones.bytes()).unwrap();
        checkpoint(&mut files, &mut disk);
        assert!(allocated_bytes(&slot0) >= len && allocated_bytes(&slot1) >= len);
        // Nothing writes slot 0's stale copy: the checkpoint after frees it.
        checkpoint(&mut files, &mut disk);
        assert_eq!(allocated_bytes(&slot0), 0, "a stale segment no write came for is freed");
        assert!(allocated_bytes(&slot1) >= len, "the latest checkpoint names slot 1");
        // A write of records (a prefix) over a stale segment would leave
        // the rest allocated: the sparse lanes' segments are freed at once.
        let sparse1 = slot_path(dir.path(), material, Lane::SparseWon, 1);
        let part = SEGMENT_ALIGN_BYTES.min(len);
        for _ in 0..2 {
            disk.write(files.write_file(Lane::SparseWon, g), span.start, &ones.bytes()[..part as usize]).unwrap();
            checkpoint(&mut files, &mut disk);
        }
        assert_eq!(allocated_bytes(&sparse1), 0, "a sparse lane's copy is freed once the other is named");
        disk.write(files.write_file(Lane::Won, g), span.start, ones.bytes()).unwrap();
        checkpoint(&mut files, &mut disk);
        assert!(allocated_bytes(&slot0) >= len && allocated_bytes(&slot1) >= len);
        // Zeros are stored as a hole, in the slot a write would have used.
        assert_eq!(files.write_zeros(Lane::Won, g).unwrap(), None);
        assert_eq!(files.read_file(Lane::Won, g), files.write_file(Lane::Won, g));
        checkpoint(&mut files, &mut disk);
        assert!(allocated_bytes(&slot0) >= len, "stale, not yet freed");
        checkpoint(&mut files, &mut disk);
        assert_eq!(allocated_bytes(&slot0) + allocated_bytes(&slot1), 0);
        let mut back = crate::solver::disk::AlignedBuf::zeroed(ones.len()).unwrap();
        back.bytes_mut().fill(7);
        disk.read(files.read_file(Lane::Won, g), span.clone(), &mut back.bytes_mut()[..ones.len()]).unwrap();
        assert!(back.bytes()[..ones.len()].iter().all(|&b| b == 0));
        // Steps over: finishing frees what is stale.
        for _ in 0..2 {
            disk.write(files.write_file(Lane::Won, g), span.start, ones.bytes()).unwrap();
            checkpoint(&mut files, &mut disk);
        }
        assert!(allocated_bytes(&slot0) >= len && allocated_bytes(&slot1) >= len);
        files.release_for_finishing().unwrap();
        assert_eq!(allocated_bytes(&slot0), 0, "finishing frees the stale copy");
        assert!(allocated_bytes(&slot1) >= len, "the latest checkpoint names slot 1");
    }
}
